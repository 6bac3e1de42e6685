package e2e

import (
	"testing"
)

// benchLedgerJSON is the part of `gpunet bench ledger -o json` a network
// run fills.
type benchLedgerJSON struct {
	Txs    int `json:"txs"`
	Ledger struct {
		TxPerS       float64 `json:"tx_per_s"`
		LatencyP50Ms float64 `json:"latency_p50_ms"`
		Blocks       int     `json:"blocks"`
		Rejected     int     `json:"rejected"`
		Lost         int     `json:"lost"`
	} `json:"ledger"`
	Network *struct {
		Validators int    `json:"validators"`
		Delay      string `json:"delay"`
	} `json:"network"`
}

// TestBenchLedgerOnValidatorProcesses runs `gpunet bench ledger` on four
// validator processes at a tiny size, on loopback and (root) on a testnet
// with a delay, so that both modes keep working.
func TestBenchLedgerOnValidatorProcesses(t *testing.T) {
	parallel(t, weightHeavy)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"loopback", nil},
		{"delay", []string{"--delay", "20ms", "--jitter", "2ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.extra != nil {
				needTestnet(t)
				lockTestnet(t)
			}
			var r benchLedgerJSON
			gpunetJSON(t, &r, append([]string{"bench", "ledger", "--validators", "4", "--processes", "--txs", "300", "--senders", "30", "--block-time", "100ms", "--timeout", "50s"}, tc.extra...)...)
			if r.Network == nil || r.Network.Validators != 4 || r.Txs != 300 {
				t.Fatalf("bench printed %+v, want a network run of 4 validators and 300 txs", r)
			}
			if r.Ledger.TxPerS <= 0 || r.Ledger.Blocks == 0 || r.Ledger.LatencyP50Ms <= 0 {
				t.Errorf("ledger figures %+v: want txs committed in blocks, with a latency", r.Ledger)
			}
			if tc.extra != nil && r.Network.Delay != "20ms" {
				t.Errorf("delay %q, want 20ms", r.Network.Delay)
			}
			t.Logf("%s: %.0f tx/s, p50 %.0f ms, %d blocks, %d rejected, %d lost", tc.name, r.Ledger.TxPerS, r.Ledger.LatencyP50Ms, r.Ledger.Blocks, r.Ledger.Rejected, r.Ledger.Lost)
		})
	}
}
