package ledger

import (
	"bytes"
	"strings"
	"testing"
)

// TestServiceCheckRateParam: service_check_rate_ppm is stored only when it
// differs from its default (a chain from before it hashes as it did),
// moves by at most its step in one proposal, and stays within 1 ppm to
// 100%.
func TestServiceCheckRateParam(t *testing.T) {
	p := DefaultParams()
	if p.ServiceCheckRatePPM != 40_000 {
		t.Fatalf("default service_check_rate_ppm %d, want 40000 (4%%)", p.ServiceCheckRatePPM)
	}
	b, err := encodeParams(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("service_check_rate_ppm")) {
		t.Errorf("the default is stored: %s", b)
	}
	up, err := ApplyParamChanges(p, []ParamChange{{Key: "service_check_rate_ppm", Value: 60_000}})
	if err != nil || up.ServiceCheckRatePPM != 60_000 {
		t.Fatalf("a change within the step: %v, rate %d", err, up.ServiceCheckRatePPM)
	}
	if b, _ := encodeParams(up); !bytes.Contains(b, []byte(`"service_check_rate_ppm":60000`)) {
		t.Errorf("a changed rate is not stored: %s", b)
	}
	for _, v := range []uint64{0, 1_000_001} {
		if _, err := ApplyParamChanges(p, []ParamChange{{Key: "service_check_rate_ppm", Value: v}}); err == nil {
			t.Errorf("service_check_rate_ppm %d taken", v)
		}
	}
	if _, err := ApplyParamChanges(p, []ParamChange{{Key: "service_check_rate_ppm", Value: 1_000_000}}); err == nil || !strings.Contains(err.Error(), "service_check_rate_ppm") {
		t.Errorf("a jump from 4%% to 100%% in one proposal: %v", err)
	}
}
