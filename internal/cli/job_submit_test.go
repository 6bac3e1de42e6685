package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitRefusesWhatNobodyOffers: job submit (and job run) refuse, before
// anything is locked, a spec that asks what no online provider offers (the
// story's network has one CPU-only provider in eu), naming the field and
// what is offered instead, as they refuse a max_price below every ask;
// --queue submits it anyway, to wait on purpose.
func TestSubmitRefusesWhatNobodyOffers(t *testing.T) {
	s := newStory(t)
	before := s.ok("query", "balance", "alice")
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"a GPU", "resources: {cpu: 1, memory: 256MiB}", "resources: {cpu: 1, memory: 256MiB, gpu: {count: 1}}",
			[]string{"no online provider can run this job, at any price", "resources.gpu.count 1 GPU", "no GPUs: 1 CPU-only provider(s)", "--queue"}},
		{"more memory", "resources: {cpu: 1, memory: 256MiB}", "resources: {cpu: 1, memory: 100GiB}",
			[]string{"resources.memory 100GiB", "at most 64 GiB", "--queue"}},
		{"another region", "verification: none", "verification: none\nregion: us-east\nregion_required: true",
			[]string{"region us-east (region_required)", "regions eu (1)", "--queue"}},
		{"too low a price", "max_price: 4", "max_price: 0.5",
			[]string{"max_price 0.5 SYNC/h is below every ask", "--queue"}},
	} {
		spec := s.spec(t, strings.Replace(specYAML, tc.from, tc.to, 1))
		for _, verb := range []string{"submit", "run"} {
			r := s.run("job", verb, spec, "--from", "alice")
			if r.code != ExitUsage {
				t.Errorf("%s: job %s: exit %d, want %d\n%s", tc.name, verb, r.code, ExitUsage, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s: job %s: stderr lacks %q:\n%s", tc.name, verb, w, r.stderr)
				}
			}
		}
	}
	if after := s.ok("query", "balance", "alice"); after != before {
		t.Errorf("a refused submission moved alice's balance: %s → %s", before, after)
	}
	gpu := s.spec(t, strings.Replace(specYAML, "resources: {cpu: 1, memory: 256MiB}", "resources: {cpu: 1, memory: 256MiB, gpu: {count: 1}}", 1))
	var sub struct{ ID uint64 }
	if r := s.run("job", "submit", gpu, "--from", "alice", "--queue", "-o", "json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &sub) != nil || sub.ID == 0 {
		t.Errorf("job submit --queue: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// spec writes yaml beside the story's module and input and returns its
// path.
func (s *story) spec(t *testing.T, yaml string) string {
	t.Helper()
	f, err := os.CreateTemp(filepath.Join(s.home, "spec"), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(yaml); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
