package offers

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Wasm engines of the fixture's wasm offers.
const (
	engineA = "wasmtime-39.0.1/linux-amd64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1"
	engineB = "wazero-1.12.0/linux-amd64/wasi-gpunet-1"
)

// fixture is a small market: different GPUs, regions, executors, wasm
// engines and prices, a CPU-only provider, two offers at the same price (0.30) for tie-breaks,
// and a stake too large for a float64 to hold exactly.
func fixture() []Offer {
	return []Offer{
		{Address: "gpu1h100", Stake: 5_000_000, Online: true, GPU: "H100_80GB", Count: 8, VRAM: 80, ComputeCap: "9.0",
			CPU: 64, RAM: 512, Disk: 2000, Price: 2.5, Region: "us-east", Reputation: 0.98, Uptime: 0.999,
			TOPS: 15800, Bandwidth: 3350, Executor: []string{"oci"}, MaxJobs: 8, Jobs: 2, TEE: "tdx", TEEExpiry: 1_700_600_000},
		{Address: "gpu1rtx4090a", Stake: 1_000_000, Online: true, GPU: "RTX_4090", Count: 2, VRAM: 24, ComputeCap: "8.9",
			CPU: 16, RAM: 64, Disk: 500, Price: 0.35, Region: "eu", Reputation: 0.9, Uptime: 0.97,
			TOPS: 1321, Bandwidth: 1008, Executor: []string{"oci", "wasm"}, WasmEngine: engineA, MaxJobs: 2, Jobs: 0},
		{Address: "gpu1rtx4090b", Stake: 200_000, Online: false, GPU: "RTX_4090", Count: 1, VRAM: 24, ComputeCap: "8.9",
			CPU: 8, RAM: 32, Disk: 200, Price: 0.30, Region: "us-west", Reputation: 0.7, Uptime: 0.9,
			TOPS: 660, Bandwidth: 1008, Executor: []string{"wasm"}, WasmEngine: engineB, MaxJobs: 1, Jobs: 1},
		{Address: "gpu1a100", Stake: 3_000_000, Online: true, GPU: "A100_80GB", Count: 4, VRAM: 80, ComputeCap: "8.0",
			CPU: 32, RAM: 256, Disk: 1000, Price: 1.2, Region: "eu", Reputation: 0.95, Uptime: 0.99,
			TOPS: 2496, Bandwidth: 2039, Executor: []string{"oci"}, MaxJobs: 4, Jobs: 4, TEE: "sev-snp", TEEExpiry: 1_700_500_000},
		{Address: "gpu1rtx3060", Stake: 0, Online: true, GPU: "RTX_3060", Count: 1, VRAM: 12, ComputeCap: "8.6",
			CPU: 6, RAM: 16, Disk: 100, Price: 0.08, Region: "asia", Reputation: 0.5, Uptime: 0.8,
			TOPS: 101, Bandwidth: 360, Executor: []string{"oci", "wasm"}, WasmEngine: engineA, MaxJobs: 1, Jobs: 0},
		{Address: "gpu1cpu", Stake: 100_000, Online: true, GPU: "cpu", Count: 0, VRAM: 0, ComputeCap: "",
			CPU: 32, RAM: 128, Disk: 1000, Price: 0.01, Region: "eu", Reputation: 0.85, Uptime: 0.95,
			TOPS: 2, Bandwidth: 100, Executor: []string{"wasm"}, WasmEngine: engineA, MaxJobs: 4, Jobs: 1},
		{Address: "gpu1b200", Stake: 9_000_000, Online: false, GPU: "B200", Count: 8, VRAM: 180, ComputeCap: "10.0",
			CPU: 128, RAM: 2048, Disk: 8000, Price: 4.0, Region: "us-east", Reputation: 1.0, Uptime: 1.0,
			TOPS: 36000, Bandwidth: 8000, Executor: []string{"oci"}, MaxJobs: 8, Jobs: 0},
		{Address: "gpu1l4", Stake: 18446744073709551615, Online: true, GPU: "L4", Count: 1, VRAM: 24, ComputeCap: "8.9",
			CPU: 8, RAM: 48, Disk: 300, Price: 0.30, Region: "eu", Reputation: 0.8, Uptime: 0.92,
			TOPS: 485, Bandwidth: 300, Executor: []string{"oci", "wasm"}, WasmEngine: engineB, MaxJobs: 2, Jobs: 1},
	}
}

func addresses(offers []Offer) []string {
	out := make([]string, len(offers))
	for i, o := range offers {
		out[i] = strings.TrimPrefix(o.Address, "gpu1")
	}
	return out
}

func TestFilter(t *testing.T) {
	all := fixture()
	q, err := Parse("region=eu")
	if err != nil {
		t.Fatal(err)
	}
	got := Filter(all, q)
	if want := []string{"rtx4090a", "a100", "cpu", "l4"}; !slices.Equal(addresses(got), want) {
		t.Errorf("Filter(region=eu) = %v, want %v", addresses(got), want)
	}
	if !reflect.DeepEqual(all, fixture()) {
		t.Error("Filter modified its input")
	}

	if got := Filter(all, nil); len(got) != len(all) {
		t.Errorf("Filter(nil query) kept %d offers, want all %d", len(got), len(all))
	}

	none, err := Parse("region=mars")
	if err != nil {
		t.Fatal(err)
	}
	got = Filter(all, none)
	if got == nil || len(got) != 0 {
		t.Errorf("Filter with no match = %#v, want an empty non-nil slice", got)
	}
	if b, _ := json.Marshal(got); string(b) != "[]" {
		t.Errorf("no matches encode as %s, want []", b)
	}
}

// TestOfferJSON pins the JSON keys, which scripts rely on (DESIGN.md §7).
func TestOfferJSON(t *testing.T) {
	b, err := json.Marshal(fixture()[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"address":"gpu1rtx4090a","stake":1000000,"online":true,"gpu":"RTX_4090","count":2,"vram":24,` +
		`"compute_cap":"8.9","cpu":16,"ram":64,"disk":500,"price":0.35,"region":"eu","reputation":0.9,` +
		`"uptime":0.97,"tops":1321,"bandwidth":1008,"executor":["oci","wasm"],` +
		`"wasm_engine":"wasmtime-39.0.1/linux-amd64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1",` +
		`"max_jobs":2,"jobs":0,` +
		`"validated":0,"invalid":0,"challenge_pass":0,"slashed":0}`
	if string(b) != want {
		t.Errorf("JSON:\n got %s\nwant %s", b, want)
	}
}

// TestEveryJSONKeyIsAField keeps the query language in step with the record:
// whatever `gpunet offers -o json` prints, a query can filter on.
func TestEveryJSONKeyIsAField(t *testing.T) {
	typ := reflect.TypeFor[Offer]()
	var keys []string
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		keys = append(keys, key)
		if lookup(key) == nil || lookup(key).name != key {
			t.Errorf("JSON key %q is not a query field", key)
		}
	}
	if len(fields) != len(keys) {
		t.Errorf("%d query fields for %d JSON keys", len(fields), len(keys))
	}
}

func TestFields(t *testing.T) {
	infos := Fields()
	seen := map[string]bool{}
	for _, fi := range infos {
		for _, n := range append([]string{fi.Name}, fi.Aliases...) {
			if seen[n] {
				t.Errorf("name %q used twice", n)
			}
			seen[n] = true
		}
		if fi.Type == "" || fi.Description == "" || len(fi.Ops) == 0 {
			t.Errorf("field %q is missing type, description or ops: %+v", fi.Name, fi)
		}
	}
	// DESIGN.md §7 requires these, in this order, for help text.
	required := strings.Fields("gpu count vram cpu ram disk price region reputation uptime tops executor")
	for i, name := range required {
		if infos[i].Name != name {
			t.Errorf("Fields()[%d] = %q, want %q", i, infos[i].Name, name)
		}
	}
	for _, alias := range []string{"gpu_name", "num_gpus", "gpu_ram", "dph", "reliability"} {
		if !seen[alias] {
			t.Errorf("alias %q missing", alias)
		}
	}
	infos[0].Aliases[0] = "changed"
	if Fields()[0].Aliases[0] == "changed" {
		t.Error("Fields returns shared slices")
	}
}
