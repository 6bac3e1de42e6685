package daemon

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// signer adapts a ledgertest key to blob.Signer.
type signer struct{ k lt.Key }

func (s signer) PrivateKey() ed25519.PrivateKey { return s.k.Priv }

func TestAPIConnLimits(t *testing.T) {
	for _, tc := range []struct {
		nofile            uint64
		wantTotal, wantIP int
	}{
		{0, 1024, 128}, {1 << 20, 1024, 128}, {4096, 1024, 128}, {1024, 256, 32}, {64, 32, 8},
	} {
		total, perIP := apiConnLimits(tc.nofile)
		if total != tc.wantTotal || perIP != tc.wantIP {
			t.Errorf("apiConnLimits(%d) = %d, %d; want %d, %d", tc.nofile, total, perIP, tc.wantTotal, tc.wantIP)
		}
		// The limits are sound for admission.NewListener, and the reserve
		// is a quarter.
		lim := apiLimits(tc.nofile, &trustedAddrs{})
		if lim.Max != total || lim.PerAddr != perIP || lim.Reserve != total/4 || lim.Reserve < 1 || lim.Reserve >= lim.Max {
			t.Errorf("apiLimits(%d) = %+v, want Max %d, PerAddr %d and a quarter in reserve", tc.nofile, lim, total, perIP)
		}
		if tc.nofile > 0 && uint64(2*total) > tc.nofile/2+2*minAPIConns {
			t.Errorf("nofile %d: %d connections may hold %d descriptors, more than half", tc.nofile, total, 2*total)
		}
	}
}

// A node's gateway refuses anonymous uploads and accounts that hold
// nothing on the ledger, and stores a funded account's ticketed upload.
func TestNodeBlobUploadsNeedAccount(t *testing.T) {
	d := startNode(t)
	var ge *blob.GatewayError
	_, _, err := blob.NewClient(d.APIURL).Put(t.Context(), strings.NewReader("anonymous"))
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous upload: %v, want 401", err)
	}
	c := blob.NewClient(d.APIURL)
	c.Signer = signer{lt.NewKey("nobody")}
	_, _, err = c.Put(t.Context(), strings.NewReader("unfunded"))
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusForbidden || !strings.Contains(ge.Message, "holds 0 SYNC") {
		t.Errorf("unfunded account: %v, want 403 saying it holds nothing", err)
	}
	c.Signer = signer{alice}
	if _, _, err := c.Put(t.Context(), strings.NewReader("alice's")); err != nil {
		t.Errorf("alice's upload: %v", err)
	}
}

// The sweeper keeps every blob a running job names: module, inputs, each
// replica's outputs and log.
func TestJobBlobs(t *testing.T) {
	name := func(s string) string { return blob.Sum([]byte(s)).String() }
	j := &ledger.Job{State: ledger.JobRunning, Spec: ledger.JobSpec{Module: name("module")}, InputBlob: name("input"), Assignments: []ledger.Assignment{
		{Result: &ledger.JobResult{OutputBlob: name("out1"), LogBlob: name("log1")}},
		{},
		{Result: &ledger.JobResult{OutputBlob: name("out2")}},
	}}
	plan, err := planRetention(func(fn func(*ledger.Job) bool) error { fn(j); return nil }, func(blob.Hash) (time.Time, bool) { return time.Time{}, false }, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"module", "input", "out1", "log1", "out2"} {
		if h, _ := blob.ParseHash(name(s)); !plan.keep[h] {
			t.Errorf("blob %q not kept: %v", s, plan.keep)
		}
	}
	if len(plan.keep) != 5 || len(plan.expired) != 0 {
		t.Errorf("kept %d blobs, expired %d, want 5 and 0", len(plan.keep), len(plan.expired))
	}
}
