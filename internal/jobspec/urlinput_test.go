package jobspec

import (
	"errors"
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

// TestURLInputHosts (issue 27): a URL input whose host is an address no
// provider fetches from (loopback, private, link-local, …, or an IPv4
// address in a form resolvers read but netip does not) is refused at
// submit, on its from field with the line and column; public addresses
// and names pass (a name is checked by the provider, on the address it
// resolves to).
func TestURLInputHosts(t *testing.T) {
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	base := "name: u\nexecutor: wasm\nmodule: sha256:" + strings.Repeat("0", 64) + "\noutputs: [/out]\nmax_price: 0.5\ntimeout: 10m\ninputs:\n  - path: /in/other\n    from: https://example.com/o\n    sha256: " + sum + "\n  - path: /in/a\n    from: "
	for _, c := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/x", "127.0.0.1 is not a public address (loopback)"},
		{"http://[::1]/x", "::1 is not a public address (loopback)"},
		{"http://10.0.0.5/x", "(private)"},
		{"https://192.168.1.1/x", "(private)"},
		{"http://172.20.0.1/x", "(private)"},
		{"http://[fd12::1]/x", "(private)"},
		{"http://169.254.169.254/latest/meta-data/", "(link-local)"},
		{"http://[fe80::1%25eth0]/x", "(link-local)"},
		{"http://100.64.0.1/x", "(shared)"},
		{"http://224.0.0.1/x", "(multicast)"},
		{"http://0.0.0.0:80/x", "(unspecified)"},
		{"http://[::ffff:127.0.0.1]/x", "(loopback)"},
		{"http://2130706433/x", "nonstandard form"},
		{"http://127.1/x", "nonstandard form"},
		{"http://0x7f.0.0.1/x", "nonstandard form"},
	} {
		_, err := Parse([]byte(base+c.url+"\n    sha256: "+sum+"\n"), "/tmp/x")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 {
			t.Errorf("%s: %v, want one error", c.url, err)
			continue
		}
		if e := es[0]; e.Field != "inputs[1].from" || e.Line != 12 || e.Column < 1 || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%s: %v (field %s, line %d, column %d), want on inputs[1].from at line 12 a message saying %q", c.url, e, e.Field, e.Line, e.Column, c.want)
		}
	}
	for _, u := range []string{"http://8.8.8.8/x", "https://[2606:4700::1111]/x", "https://example.com/x", "http://localhost.example/x", "https://data.example.org:8443/x?v=1"} {
		if _, err := Parse([]byte(base+u+"\n    sha256: "+sum+"\n"), "/tmp/x"); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
