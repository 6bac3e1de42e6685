package ocilayer

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
)

func TestTar(t *testing.T) {
	files := map[string]File{
		"/bin/app": {Data: []byte("app"), Mode: 0o755},
		"etc/x":    {Data: []byte("x")},
		"a/b/c/d":  {Data: nil},
	}
	b, err := Tar(files)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		name string
		mode int64
		data string
	}
	want := []entry{
		{"a/", 0o755, ""}, {"a/b/", 0o755, ""}, {"a/b/c/", 0o755, ""}, {"bin/", 0o755, ""}, {"etc/", 0o755, ""},
		{"bin/app", 0o755, "app"}, {"a/b/c/d", 0o644, ""}, {"etc/x", 0o644, "x"},
	}
	// Files are sorted by the path as given: "/bin/app" before "a/b/c/d".
	var got []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if !h.ModTime.Equal(mtime) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, mtime)
		}
		got = append(got, entry{h.Name, h.Mode, string(data)})
	}
	if len(got) != len(want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestLayerDeterministic: a spec names an example's image by digest, so the
// same files must give the same layer digest, build after build.
func TestLayerDeterministic(t *testing.T) {
	digest := func() string {
		l, err := Layer(map[string]File{"job": {Data: []byte("prog"), Mode: 0o755}, "etc/passwd": {Data: []byte("root:x:0:0::/:/job\n")}})
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if a, b := digest(), digest(); a != b {
		t.Errorf("two layers of the same files have digests %s and %s", a, b)
	}
}
