package jobspec

import (
	"strings"
	"testing"
)

// TestURLInputs: an input from an http(s) URL needs its sha256, lands in
// the ledger spec's URL inputs (not the encrypted bundle), and the
// ledger's rules apply to it.
func TestURLInputs(t *testing.T) {
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	base := "name: u\nexecutor: wasm\nmodule: sha256:" + strings.Repeat("0", 64) + "\noutputs: [/out]\nmax_price: 0.5\ntimeout: 10m\nresources: {disk: 64MiB}\ninputs:\n"
	s, err := Parse([]byte(base+"  - {path: /in/data.csv, from: https://example.com/data.csv, sha256: "+sum+", size: 1MiB}\n  - {path: /in/local, from: ./local}\n"), "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	ls := s.LedgerSpec(PlaceholderModule)
	if len(ls.URLInputs) != 1 || ls.URLInputs[0].URL != "https://example.com/data.csv" || ls.URLInputs[0].SHA256 != "sha256:"+sum || ls.URLInputs[0].Size != 1<<20 {
		t.Fatalf("url inputs %+v", ls.URLInputs)
	}
	if len(ls.Inputs) != 1 || ls.Inputs[0] != "/in/local" {
		t.Fatalf("bundle inputs %v", ls.Inputs)
	}
	if err := ls.Validate(); err != nil {
		t.Fatalf("the ledger refuses it: %v", err)
	}
	if _, ok := s.Inputs[0].LocalPath(); ok {
		t.Fatal("a URL input is taken for a local file")
	}
	for _, c := range []struct{ input, field, want string }{
		{"{path: /in/a, from: https://example.com/a}", "inputs[0].sha256", "required"},
		{"{path: /in/a, from: https://example.com/a, sha256: abc}", "inputs[0].sha256", "64 hex"},
		{"{path: /in/a, from: 'https://user:pw@example.com/a', sha256: " + sum + "}", "inputs[0].from", "user"},
		{"{path: /in/a, from: ./a, sha256: " + sum + "}", "inputs[0].sha256", "URL"},
		{"{path: /in/a, from: https://example.com/a, sha256: " + sum + ", size: 1GiB}", "inputs", "resources.disk"},
	} {
		_, err := Parse([]byte(base+"  - "+c.input+"\n"), "/tmp/x")
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error on %s saying %q", c.input, err, c.field, c.want)
		}
	}
}
