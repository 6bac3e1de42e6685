package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/provider"
)

const attestData = "../attest/testdata/"

func runAttest(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), append([]string{"attest", "verify"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAttestVerifyCLI(t *testing.T) {
	snp := []string{attestData + "snp/report.bin", "--collateral", attestData + "snp", "--at", "2024-01-01T00:00:00Z", "--allow-missing-crl"}

	// The recorded, AMD-signed report verifies (its guest is debuggable).
	code, out, errs := runAttest(t, append(snp, "--allow-debug")...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, w := range []string{"verified: AMD SEV-SNP", "platform:      AMD Milan (Milan-B0)", "MEASUREMENT b07af9620f3b839b", "binding:       not checked", "valid until:   2029-09-24T00:55:28Z", "revocation:    NOT checked"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	// Not verified: exit 1 and the reason.
	code, _, errs = runAttest(t, snp...)
	if code != ExitError || !strings.Contains(errs, "not verified: policy: the guest policy (0xb0000) allows debugging") {
		t.Errorf("debuggable guest: exit %d, %s", code, errs)
	}
	code, _, errs = runAttest(t, append(snp, "--allow-debug", "--nonce", "0102030405", "--key", "age1key")...)
	if code != ExitError || !strings.Contains(errs, "not verified: binding: report data 0102030405") {
		t.Errorf("wrong nonce: exit %d, %s", code, errs)
	}
	code, _, errs = runAttest(t, append(snp, "--allow-debug", "--min-snp-tcb", "2,0,5,69")...)
	if code != ExitError || !strings.Contains(errs, "tcb: stale TCB: the report's microcode SPL is 68, the minimum is 69") {
		t.Errorf("stale TCB: exit %d, %s", code, errs)
	}

	// -o json: the result on stdout, verified or not.
	code, out, _ = runAttest(t, append(snp, "--allow-debug", "-o", "json")...)
	var res attestResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK || !res.Verified || res.Claims.TEE != "SEV-SNP" {
		t.Errorf("json: exit %d, %+v, %v\n%s", code, res, err, out)
	}
	code, out, _ = runAttest(t, attestData+"tdx/quote.dat", "--collateral", attestData+"tdx", "--at", "2023-07-01T00:00:00Z", "-o", "json")
	res = attestResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitError || res.Verified || res.Reason != "tcb" || res.Kind != "tdx" {
		t.Errorf("tdx json: exit %d, %+v, %v\n%s", code, res, err, out)
	}
	code, _, errs = runAttest(t, attestData+"tdx/quote.dat", "--at", "2023-07-01T00:00:00Z")
	if code != ExitError || !strings.Contains(errs, "collateral: missing tcb_info.json") {
		t.Errorf("no collateral: exit %d, %s", code, errs)
	}

	// Usage errors: exit 2.
	if code, _, _ := runAttest(t, append(snp, "--at", "yesterday")...); code != ExitUsage {
		t.Errorf("bad --at: exit %d", code)
	}
	if code, _, _ := runAttest(t, append(snp, "--key", "k")...); code != ExitUsage {
		t.Errorf("--key without --nonce: exit %d", code)
	}

	// NVIDIA GPU evidence: the recorded Hopper bundle verifies; refusals
	// say why.
	gpu := attestData + "nvidia/hopper_bundle.json"
	code, out, errs = runAttest(t, gpu, "--at", "2025-03-01T00:00:00Z")
	if code != ExitOK {
		t.Fatalf("gpu: exit %d: %s%s", code, out, errs)
	}
	for _, w := range []string{"verified: NVIDIA GPU confidential computing evidence", "gpu identity:  41431D480FE5E87274 (DeviceID certificate serial, GH100 A01 GSP BROM)", "driver:        550.90.07", "vbios:         96.00.9F.00.01", "fwid:          f5c384ae", "spdm nonce:    931d8dd0", "valid until:   9999-12-31T23:59:59Z"} {
		if !strings.Contains(out, w) {
			t.Errorf("gpu output lacks %q:\n%s", w, out)
		}
	}
	code, _, errs = runAttest(t, gpu, "--at", "2025-03-01T00:00:00Z", "--nonce", "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb")
	if code != ExitError || !strings.Contains(errs, "not verified: binding: the GPU report's SPDM nonce 931d8dd0") {
		t.Errorf("gpu wrong nonce: exit %d, %s", code, errs)
	}
	code, out, _ = runAttest(t, gpu, "--at", "2020-01-01T00:00:00Z", "-o", "json")
	res = attestResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitError || res.Reason != "expired" || res.Kind != "nvidia-gpu" {
		t.Errorf("gpu before issue, json: exit %d, %+v, %v\n%s", code, res, err, out)
	}
	code, out, _ = runAttest(t, gpu, "--at", "2025-03-01T00:00:00Z", "-o", "json")
	res = attestResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK || res.Claims.GPU == nil || res.Claims.GPU.ID != "41431D480FE5E87274" {
		t.Errorf("gpu json: exit %d, %+v, %v\n%s", code, res, err, out)
	}
	if code, _, _ := runAttest(t, gpu, "--collateral", attestData+"snp"); code != ExitUsage {
		t.Errorf("gpu with --collateral: exit %d", code)
	}
}

// TestTEEGPUOptions: --tee-gpu gives the agent an NVML GPU producer per
// index, with --tee or alone; an index twice is a usage error.
func TestTEEGPUOptions(t *testing.T) {
	o, err := teeOptions("", "", []int{0, 2})
	if err != nil || o.Producer != nil || len(o.GPUs) != 2 || o.GPUs[1] != provider.GPUProducer(attest.GPUProducer{Index: 2}) {
		t.Fatalf("--tee-gpu 0,2: %+v, %v", o, err)
	}
	o, err = teeOptions("sev-snp", "", []int{1})
	if err != nil || o.Producer == nil || len(o.GPUs) != 1 {
		t.Fatalf("--tee sev-snp --tee-gpu 1: %+v, %v", o, err)
	}
	if _, err := teeOptions("", "", []int{1, 1}); !errors.As(err, new(usageError)) {
		t.Errorf("an index twice: %v", err)
	}
	if _, err := teeOptions("nvidia-gpu", "", nil); err == nil || !strings.Contains(err.Error(), "--tee-gpu") {
		t.Errorf("--tee nvidia-gpu: %v", err)
	}
}
