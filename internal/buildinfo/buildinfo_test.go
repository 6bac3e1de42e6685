package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	want := `# HELP gpunet_build_info The running build: version, commit (the VCS revision; -modified when built from a changed tree) and goversion in its labels; always 1.
# TYPE gpunet_build_info gauge
`
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %d families: %v", len(mfs), err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["goversion"] != runtime.Version() || labels["version"] == "" || m.GetGauge().GetValue() != 1 {
		t.Errorf("gpunet_build_info: %v = %v", labels, m.GetGauge().GetValue())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want+`gpunet_build_info{commit="`+labels["commit"]+`",goversion="`+runtime.Version()+`",version="`+labels["version"]+`"} 1
`)); err != nil {
		t.Error(err)
	}
}
