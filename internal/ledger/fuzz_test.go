package ledger_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

func FuzzDecodeTx(f *testing.F) {
	f.Add(alice.Send(0, bob.Addr, 10))
	f.Add(rawTx(alice, lt.ChainID, 0, 1, `{"to":"x","amount":-1}`))
	f.Add([]byte{1})
	f.Add([]byte("garbage"))
	// create_validator with its proof of possession (issue 27), and without
	// one, as before it (it still decodes; ValidateBasic refuses it).
	f.Add(alice.Tx(lt.ChainID, 0, 0, lt.CreateValidator(alice, "node", 10)))
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgCreateValidator{PubKey: lt.ConsKey("node"), Stake: 10, Moniker: "m"}))
	// A registration with a provider label (issue 33), one the ledger
	// takes and one it refuses (a bidi override in it).
	labelled := lt.ProviderInfo("RTX_4090", 1, 500_000)
	labelled.Label = "Acme GPUs #2"
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: labelled}))
	labelled.Label = "Acme\u202e2#"
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgUpdateProvider{ProviderInfo: labelled}))
	// The TEE messages (issue 31): a nonce request, evidence with
	// collateral and a root, and a trust: tee job with a pinned
	// measurement.
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgRequestAttestation{}))
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgAttest{Kind: "sev-snp", Evidence: make([]byte, 1184),
		Collateral: []ledger.AttestBlob{{Name: "cert_chain.pem", Data: []byte("-----BEGIN")}, {Name: "vcek.der", Data: []byte{0x30}}}, Roots: [][]byte{{0x30, 0x82}}}))
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgAttest{Kind: "nvidia-gpu", Roots: [][]byte{{0x30, 0x82}},
		GPUs: []ledger.AttestGPU{{UUID: "GPU-1", Evidence: []byte{0x11, 0xe0, 0x01, 0xff}, CertChain: []byte("-----BEGIN")}}}))
	teeSpec := lt.WasmJob("tee", 1000, 60)
	teeSpec.Trust, teeSpec.TEEMeasurements = ledger.TrustTEE, []string{hex64}
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgSubmitJob{Spec: teeSpec, ConsumerKey: "age1x"}))
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgSubmitProposal{Kind: ledger.ProposalAttestRoots, Title: "roots",
		AddRoots: []string{hex64}, RemoveRoots: []string{ledger.DefaultAttestRoots[0]}, Deposit: 10}))
	// The judging round's messages (issue 29): a commitment, a reveal, and
	// a reveal with a bit past the 55 pairs (ValidateBasic refuses it).
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgCommitJudgment{JobID: 1, Commitment: ledger.JudgmentCommitment(1, 1, 1, alice.Addr, ledger.Hash{7})}))
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgRevealJudgment{JobID: 1, Salt: ledger.Hash{7}, Vector: 0b101}))
	f.Add(rawTx(alice, lt.ChainID, 0, uint64(ledger.MsgTypeRevealJudgment), `{"job_id":1,"salt":"`+hex64+`","vector":18446744073709551615}`))
	// Each service message (issue 16), so that the fuzzer starts from
	// their shapes.
	for typ, body := range map[ledger.MsgType]string{
		ledger.MsgTypeDeployService: `{"spec":{"name":"s","image":"r/x@sha256:` + hex64 + `","cpu_milli":500,"memory":1048576,"disk":1048576,` +
			`"gpu_count":0,"max_price_per_hour":10,"ports":[{"port":8000,"protocol":"http"}],"readiness":{"port":8000,"path":"/health",` +
			`"interval_seconds":1,"timeout_seconds":1,"failure_threshold":3,"start_seconds":60},"replicas":1,"openai":{"port":8000,"models":["m"]}},` +
			`"budget":1000000,"consumer_key":"age1x","public":true}`,
		ledger.MsgTypeTopUpService:      `{"service_id":1,"amount":5}`,
		ledger.MsgTypeScaleService:      `{"service_id":1,"replicas":2}`,
		ledger.MsgTypeStopService:       `{"service_id":1}`,
		ledger.MsgTypeSetServiceAccess:  `{"service_id":1,"public":false,"key_hashes":["` + hex64 + `"]}`,
		ledger.MsgTypeServiceHeartbeat:  `{"replicas":[{"service_id":1,"ready":true,"relay":"http://127.0.0.1:1"}]}`,
		ledger.MsgTypeReleaseReplica:    `{"service_id":1,"reason":"not ready"}`,
		ledger.MsgTypeEvictReplica:      `{"service_id":1,"provider":"` + bob.Addr.String() + `"}`,
		ledger.MsgTypeAttestServed:      `{"period":56666666,"replicas":[{"service_id":1,"provider":"` + bob.Addr.String() + `"}]}`,
		ledger.MsgTypeReportReplicaDown: `{"replicas":[{"service_id":1,"provider":"` + bob.Addr.String() + `"}]}`,
		ledger.MsgTypeDelegate:          `{"kind":"validator","target":"` + bob.Addr.String() + `","amount":5}`,
		ledger.MsgTypeUndelegate:        `{"kind":"provider","target":"` + bob.Addr.String() + `","amount":5}`,
		ledger.MsgTypeRedelegate:        `{"from_kind":"validator","from":"` + bob.Addr.String() + `","to_kind":"provider","to":"` + alice.Addr.String() + `","amount":5}`,
		ledger.MsgTypeSetCommission:     `{"kind":"validator","rate_ppm":50000}`,
		ledger.MsgTypeGangMember:        `{"job_id":1,"public_key":"` + hex64 + `","endpoint":"203.0.113.7:51820"}`,
		ledger.MsgTypeSubmitJob: `{"spec":{"name":"g","executor":"oci","image":"r/x@sha256:` + hex64 + `","outputs":["/out"],"cpu_milli":1000,` +
			`"memory":1073741824,"disk":1048576,"gpu_count":8,"interconnect":"nvlink","nodes":3,"shm":536870912,"max_price_per_hour":100,` +
			`"timeout_seconds":60,"verification":"none"},"consumer_key":"age1x"}`,
	} {
		f.Add(rawTx(alice, lt.ChainID, 0, uint64(typ), body))
	}
	// A gang at verification full (replica gangs, gang_verify.go).
	f.Add(rawTx(alice, lt.ChainID, 0, uint64(ledger.MsgTypeSubmitJob), `{"spec":{"name":"g","executor":"oci","image":"r/x@sha256:`+hex64+`","outputs":["/out"],"cpu_milli":1000,`+
		`"memory":1073741824,"disk":1048576,"nodes":2,"max_price_per_hour":100,"timeout_seconds":60,"verification":"full","deterministic":true},"consumer_key":"age1x"}`))
	// A service dispute (issue 29): three signed receipts, two alike.
	var receipts []ledger.ServiceReceipt
	for i, k := range []lt.Key{alice, bob, carol} {
		r := ledger.ServiceReceipt{ServiceID: 1, Provider: k.Addr, RequestHash: ledger.Hash{1}, ResponseHash: ledger.Hash{byte(i / 2)}, Time: 1_700_000_000_000}
		r.Sign(lt.ChainID, k.Priv)
		receipts = append(receipts, r)
	}
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgServiceDispute{Receipts: receipts}))
	// One judged by its answers' log-probabilities: the answers bound to
	// the receipts by their hashes.
	var lpReceipts []ledger.ServiceReceipt
	var answers []json.RawMessage
	for i, k := range []lt.Key{alice, bob, carol} {
		a := &logprob.Answer{Choices: []logprob.Choice{{Text: string(rune('a' + i/2)), Finish: "stop",
			Tokens: []logprob.Token{{Token: string(rune('a' + i/2)), Logprob: -int64(i) * 1e6, Top: []logprob.Alt{{Token: "a", Logprob: -1e6}}}}}}}
		r := ledger.ServiceReceipt{ServiceID: 1, Provider: k.Addr, RequestHash: ledger.Hash{1}, ResponseHash: a.TextHash(), LogprobsHash: a.LogprobsHash(), Time: 1_700_000_000_000}
		r.Sign(lt.ChainID, k.Priv)
		lpReceipts, answers = append(lpReceipts, r), append(answers, a.Encode())
	}
	f.Add(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgServiceDispute{Receipts: lpReceipts, Answers: answers}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tx, err := ledger.DecodeTx(raw)
		if err != nil {
			if ledger.CodeOf(err) == ledger.ErrInternal.Code {
				t.Fatalf("decode error without a class: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes to the same bytes: one encoding per tx.
		again, err := tx.Encode()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(again, raw) {
			t.Fatalf("re-encoded tx differs:\n in %x\nout %x", raw, again)
		}
	})
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// FuzzApplyBlock applies the same fuzz-chosen block to two fresh chains and
// requires the same app hash and intact invariants. The input mixes valid
// signed transfers (chosen by the fuzzer's bytes) with raw garbage.
func FuzzApplyBlock(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte("junk"))
	f.Add([]byte{}, []byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64), alice.Send(0, bob.Addr, 1))
	keys := []lt.Key{alice, bob, carol}
	f.Fuzz(func(t *testing.T, plan []byte, junk []byte) {
		var txs [][]byte
		for i := 0; i+4 <= len(plan) && len(txs) < 64; i += 4 {
			from, to := keys[int(plan[i])%3], keys[int(plan[i+1])%3]
			seq := uint64(plan[i+2] % 4)
			amt := uint64(binary.BigEndian.Uint16([]byte{plan[i+3], plan[i]})) % 700
			txs = append(txs, from.Send(seq, to.Addr, amt))
			if plan[i]&0x80 != 0 && len(junk) > 0 {
				txs = append(txs, junk)
			}
		}
		g := lt.Genesis(1000, "alice", "bob")
		c1, c2 := lt.NewChain(t, g), lt.NewChain(t, g)
		c1.ApplyBlock(t, txs...)
		c2.ApplyBlock(t, txs...)
		if !bytes.Equal(c1.Hash, c2.Hash) {
			t.Fatalf("app hashes differ: %x vs %x", c1.Hash, c2.Hash)
		}
	})
}
