package attest_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
)

var (
	nonce = []byte("chain nonce at height 100")
	key   = []byte("age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq")
)

func wantReason(t *testing.T, err error, r attest.Reason, words ...string) {
	t.Helper()
	if got := attest.ReasonOf(err); got != r {
		t.Fatalf("refused for %q (%v), want %q", got, err, r)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q does not say %q", err, w)
		}
	}
}

// Evidence over gpunet's binding (a test GPU's: the recorded reports bind
// NVIDIA's nonces) verifies at its nonce and key, and at no other.
func TestNVIDIAGPUBinding(t *testing.T) {
	g := attesttest.NewGPU(0xABCDEF)
	ev := g.Evidence(nonce, key)
	o := attest.Options{Now: attesttest.GPUTime, Nonce: nonce, Key: key, TrustedRoots: [][]byte{attesttest.GPURootDER()}}
	c, err := attest.Verify(ev, o)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Bound || c.GPU.ID != "ABCDEF" || c.GPU.DeviceName != "NVIDIA:GH100:abcdef" || c.GPU.DriverVersion != "550.90.07" {
		t.Errorf("claims %+v gpu %+v", c, c.GPU)
	}
	want := attest.GPUNonce(nonce, key)
	if rd := attest.ReportData(nonce, key); c.ReportData != hex.EncodeToString(rd[:32]) || c.ReportData != hex.EncodeToString(want[:]) {
		t.Errorf("SPDM nonce %s, want the first half of ReportData %x", c.ReportData, rd)
	}
	o2 := o
	o2.Nonce = []byte("a later nonce")
	_, err = attest.Verify(ev, o2)
	wantReason(t, err, attest.ReasonBinding, "replayed")
	o3 := o
	o3.Key = []byte("age1another")
	_, err = attest.Verify(ev, o3)
	wantReason(t, err, attest.ReasonBinding)
	// The real roots do not trust the test GPU.
	o4 := o
	o4.TrustedRoots = attest.DefaultRoots()
	_, err = attest.Verify(ev, o4)
	wantReason(t, err, attest.ReasonChain)
	// A report of another test GPU with this one's chain.
	ev2 := attesttest.NewGPU(7).Evidence(nonce, key)
	ev2.Collateral = ev.Collateral
	_, err = attest.Verify(ev2, o)
	wantReason(t, err, attest.ReasonSignature)
}
