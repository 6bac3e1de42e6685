package ledger

import (
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// The tally at 100k voters (issue 14's target: ≤ 50 ms), against a
// baseline in the same run: reading the same number of plain account
// records in address order. Half the voters are validator operators (an
// operator entry and a validator record each), half providers with a
// realistic record (two GPUs, asks, class records), each with one vote
// and its entry in the voting weight index, which is what the tally
// reads (gov_weight.go).
//
//	go test -run '^$' -bench 'Tally' -benchtime 5x ./internal/ledger/

const benchVoters = 100_000

// sortedKV is an ordered in-memory store, as the node's (Pebble) is:
// Get by map, Iterate by binary search over the sorted keys. MemKV sorts
// every key on each Iterate, which would measure MemKV, not the tally.
type sortedKV struct {
	m    map[string][]byte
	keys []string
}

func (s *sortedKV) Get(key []byte) []byte { return s.m[string(key)] }

func (s *sortedKV) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	i, _ := slices.BinarySearch(s.keys, string(start))
	for ; i < len(s.keys) && (end == nil || s.keys[i] < string(end)); i++ {
		if !fn([]byte(s.keys[i]), s.m[s.keys[i]]) {
			return
		}
	}
}

// benchGovState returns a state with benchVoters votes on proposal 1 and
// as many accounts.
func benchGovState(b *testing.B) *sortedKV {
	b.Helper()
	kv := NewMemKV()
	o := NewOverlay(kv)
	for i := range benchVoters {
		seed := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		var a address.Address
		copy(a[:], seed[:])
		setAccount(o, &Account{Address: a, Balance: 1_000_000 + uint64(i), Sequence: 7})
		if i%2 == 0 {
			v := &Validator{Operator: a, PubKey: seed[:], Moniker: "bench", Bond: 10_000_000 + uint64(i)}
			c := v.ConsAddress()
			o.Set(validatorKey(c), v.encode())
			o.Set(valOperatorKey(a), c[:])
		} else {
			p := &Provider{Address: a, Stake: 100_000_000, Online: true, Reputation: 900_000,
				ProviderInfo: ProviderInfo{
					Inventory: Inventory{CPUCores: 32, CPUModel: "AMD EPYC 7543", RAM: 256 << 30, Disk: 2 << 40, OS: "linux", Arch: "amd64",
						GPUs: []GPUSpec{{Class: "RTX_4090", VRAM: 24 << 30, ComputeCap: "8.9"}, {Class: "RTX_4090", VRAM: 24 << 30, ComputeCap: "8.9"}}},
					Measured: Measured{Int8GOPS: 2000, BandwidthMBs: 40000, Device: "cpu"}, Region: "eu", Executors: []string{"wasm", "oci"},
					WasmEngine: "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1",
					Asks:       []Ask{{Class: "RTX_4090", PricePerHour: 400_000}, {Class: CPUClass, PricePerHour: 20_000}}, MaxJobs: 4,
				},
				Classes: []ClassRecord{{Class: "RTX_4090"}}}
			o.Set(providerKey(a), encodeRecord(p))
		}
		o.Set(govVoteKey(1, a), []byte{byte(i % 4)})
		setUint(o, govWeightKey(a), 10_000_000+uint64(i))
		moveVote(o, 1, -1, i%4, 10_000_000+uint64(i)) // as execVote does
	}
	setUint(o, keyValBonded, 1)
	setUint(o, keyStaked, 1)
	kv.Apply(o.Changes())
	out := &sortedKV{m: kv.m}
	for k := range kv.m {
		out.keys = append(out.keys, k)
	}
	slices.Sort(out.keys)
	return out
}

// BenchmarkTally100k is the tally at the end of a voting period with
// 100k votes: the running tally's one read (gov_running.go).
func BenchmarkTally100k(b *testing.B) {
	kv := benchGovState(b)
	want, err := recountVotes(kv, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		t, err := TallyVotes(kv, 1)
		if err != nil || [4]uint64{t.Yes, t.No, t.Abstain, t.Veto} != want {
			b.Fatal(t, want, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/tally")
}

// BenchmarkRecount100k counts the same 100k votes from the votes and the
// weight index, one pass (what the tally cost before the running tally,
// and what the runningTalliesMatchVotes invariant costs).
func BenchmarkRecount100k(b *testing.B) {
	kv := benchGovState(b)
	b.ResetTimer()
	for b.Loop() {
		if t, err := recountVotes(kv, 1); err != nil || t == ([4]uint64{}) {
			b.Fatal(t, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/pass")
}

// BenchmarkTallyBaselineAccounts100k reads as many plain account records
// as the tally reads votes, in address order.
func BenchmarkTallyBaselineAccounts100k(b *testing.B) {
	kv := benchGovState(b)
	b.ResetTimer()
	for b.Loop() {
		var sum uint64
		n := 0
		kv.Iterate(prefixAccount, prefixEnd(prefixAccount), func(k, v []byte) bool {
			var a address.Address
			copy(a[:], k[len(prefixAccount):])
			acct, err := decodeAccount(a, v)
			if err != nil {
				b.Fatal(err)
			}
			sum += acct.Balance
			n++
			return true
		})
		if n != benchVoters {
			b.Fatalf("%d accounts", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
}
