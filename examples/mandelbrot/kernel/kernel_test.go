package kernel_test

import (
	"testing"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
)

// TestGolden pins the image bit for bit: it must not change with the
// platform (arm64 may fuse multiply-adds where the kernel does not forbid
// it) or the Go version, or replicas on different machines would disagree.
func TestGolden(t *testing.T) {
	tests := []struct {
		w, h, iter int
		want       string
	}{
		{64, 48, 100, "93d43b9b7a0bab785690a0603a578e5c67f1454eb2530e306c38c5f040389190"},
		{160, 120, 300, "dd7c48f3a0252f86cc3e9f55f70118ea904254147a3adaed32b758182c7bb897"},
	}
	for _, tc := range tests {
		img := kernel.PGM(tc.w, tc.h, kernel.Render(kernel.Whole, tc.w, tc.h, tc.iter))
		if got := kernel.Checksum(img); got != tc.want {
			t.Errorf("%dx%d×%d: sha256 %s, want %s", tc.w, tc.h, tc.iter, got, tc.want)
		}
	}
}

func TestRenderShape(t *testing.T) {
	pix := kernel.Render(kernel.Whole, 40, 30, 50)
	if len(pix) != 40*30 {
		t.Fatalf("len %d", len(pix))
	}
	// The centre of the main cardioid is in the set, the corners are not.
	if c := kernel.Render(kernel.View{CenterX: -0.2, Width: 0.01}, 1, 1, 500); c[0] != 0 {
		t.Errorf("(-0.2, 0) shaded %d, want 0 (in the set)", c[0])
	}
	if pix[0] == 0 || pix[len(pix)-1] == 0 {
		t.Errorf("corners shaded %d, %d; want > 0", pix[0], pix[len(pix)-1])
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		w, h, i int
		ok      bool
	}{
		{nil, 640, 480, 1000, true},
		{[]string{"10"}, 10, 480, 1000, true},
		{[]string{"10", "20", "30"}, 10, 20, 30, true},
		{[]string{"0"}, 0, 0, 0, false},
		{[]string{"x"}, 0, 0, 0, false},
		{[]string{"1", "2", "3", "4"}, 0, 0, 0, false},
		{[]string{"32768", "32768"}, 0, 0, 0, false},
	}
	for _, tc := range tests {
		w, h, i, err := kernel.ParseArgs(tc.args)
		if (err == nil) != tc.ok || w != tc.w || h != tc.h || i != tc.i {
			t.Errorf("ParseArgs(%q) = %d, %d, %d, %v", tc.args, w, h, i, err)
		}
	}
}
