package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestTEEHandoverOnlyToAttested: the primary of a spot-checked trust: tee
// job, once committed, may hand the job key to the audit replica while
// that replica's provider is attested over the key it declares; the
// handover is refused (ErrAttestation) once the auditor declares another
// encryption key, and once its attestation has expired.
func TestTEEHandoverOnlyToAttested(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, c *lt.Chain, auditor lt.Key)
		want  string
	}{
		{"attested", func(*testing.T, *lt.Chain, lt.Key) {}, ""},
		{"key changed", func(t *testing.T, c *lt.Chain, auditor lt.Key) {
			pi := provider(t, c, auditor).ProviderInfo
			pi.EncryptionKey = lt.AgeKey("another")
			must(t, []ledger.TxResult{send(t, c, auditor, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
		}, "not the one its evidence attested"},
		{"expired", func(t *testing.T, c *lt.Chain, auditor lt.Key) {
			c.Advance(time.Duration(provider(t, c, auditor).TEE.Expiry-c.Now().Unix()) * time.Second)
		}, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := teeChain(t, func(g *ledger.Genesis) {
				g.Params.JobGrantTimeout, g.Params.AttestMaxValidity = 86_400, 600
			})
			attestNow(t, c, prov1)
			attestNow(t, c, prov2)
			spec := teeJob("tee-audit")
			spec.Verification = ledger.VerifySpot
			kc := ledger.JobKeyCommitment(jobKeyText)
			must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("consumer"), KeyCommitment: &kc})})
			primary := runReplicas(t, c, 1, 100, nil)[0]
			j := job(t, c, 1)
			if !j.AuditDrawn || len(j.Assignments) != 2 || j.Assignments[1].KeyGrant != nil {
				t.Fatalf("want an audit replica waiting for the key: %+v", j)
			}
			auditor := provKey(t, j.Assignments[1].Provider)
			pub, err := ledger.HandoverPublicKey(auditSecret)
			if err != nil {
				t.Fatal(err)
			}
			must(t, []ledger.TxResult{send(t, c, auditor, &ledger.MsgRequestKeyHandover{JobID: 1, PublicKey: pub})})
			tc.after(t, c, auditor)
			r := handOver(t, c, primary, auditor, jobKeyText)
			if tc.want == "" {
				must(t, []ledger.TxResult{r})
				if a := assignmentOf(job(t, c, 1), auditor.Addr); a.KeyGrant == nil || a.HandedBy == nil || *a.HandedBy != primary.Addr {
					t.Fatalf("handover not recorded: %+v", a)
				}
				return
			}
			if !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("handover: %v, want refused saying %q", r.Err, tc.want)
			}
			if a := assignmentOf(job(t, c, 1), auditor.Addr); a.KeyGrant != nil {
				t.Fatalf("refused handover left a grant: %+v", a)
			}
		})
	}
}
