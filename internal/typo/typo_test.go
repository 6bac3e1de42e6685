package typo

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"vram", "vram", 0}, {"vrm", "vram", 1}, {"regoin", "region", 1},
		{"timout", "timeout", 1}, {"abc", "", 3}, {"cpu", "gpu", 1}, {"ab", "ba", 1},
		{"prcie", "price", 1}, {"kitten", "sitting", 3},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
