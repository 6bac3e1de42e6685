package blob

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseHash(t *testing.T) {
	empty := Sum(nil) // e3b0c442...
	tests := []struct {
		in      string
		want    Hash
		wantErr string // substring; "" means success
	}{
		{in: empty.String(), want: empty},
		{in: "sha256:" + strings.Repeat("0", 64), want: Hash{}},
		{in: "", wantErr: `want "sha256:"`},
		{in: empty.Hex(), wantErr: `want "sha256:"`},
		{in: "SHA256:" + empty.Hex(), wantErr: `want "sha256:"`},
		{in: "sha512:" + empty.Hex(), wantErr: `want "sha256:"`},
		{in: "sha256:", wantErr: "got 0"},
		{in: "sha256:" + empty.Hex()[:63], wantErr: "got 63"},
		{in: "sha256:" + empty.Hex() + "0", wantErr: "got 65"},
		{in: "sha256:" + strings.ToUpper(empty.Hex()), wantErr: "not a lowercase hex digit"},
		{in: "sha256:" + strings.Repeat("g", 64), wantErr: "character 8 ('g')"},
		{in: " sha256:" + empty.Hex(), wantErr: `want "sha256:"`},
		{in: "sha256:" + empty.Hex()[:62] + "\x00\x00", wantErr: "not a lowercase hex digit"},
	}
	for _, tt := range tests {
		got, err := ParseHash(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseHash(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadHash) {
			t.Errorf("ParseHash(%q) error = %v; want ErrBadHash mentioning %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestHashJSON(t *testing.T) {
	in := PutResponse{Hash: Sum([]byte("x")), Size: 1}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"hash":"` + in.Hash.String() + `","size":1}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
	var out PutResponse
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip = %+v, %v; want %+v", out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"hash":"sha256:zz"}`), &out); err == nil {
		t.Error("unmarshalling a bad hash succeeded")
	}
}

// FuzzParseHash checks that ParseHash never panics and accepts exactly the
// strings String produces: a blob has one name.
func FuzzParseHash(f *testing.F) {
	f.Add(Sum(nil).String())
	f.Add("sha256:")
	f.Add("sha256:" + strings.Repeat("A", 64))
	f.Add(strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHash(s)
		if err != nil {
			if !errors.Is(err, ErrBadHash) {
				t.Fatalf("ParseHash(%q) error %v does not wrap ErrBadHash", s, err)
			}
			return
		}
		if h.String() != s {
			t.Fatalf("ParseHash(%q) accepted a non-canonical name; String() = %q", s, h.String())
		}
		again, err := ParseHash(h.String())
		if err != nil || again != h {
			t.Fatalf("ParseHash(String()) = %v, %v; want %v", again, err, h)
		}
	})
}
