package offers

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseSort(t *testing.T) {
	tests := []struct {
		in   string
		want []SortKey
	}{
		{"", []SortKey{{"price", false}, {"address", false}}},
		{"  ", []SortKey{{"price", false}, {"address", false}}},
		{"price", []SortKey{{"price", false}}},
		{"price-", []SortKey{{"price", true}}},
		{"-price", []SortKey{{"price", true}}},
		{"price-,tops", []SortKey{{"price", true}, {"tops", false}}},
		{" dph - , Reliability ", []SortKey{{"price", true}, {"uptime", false}}},
		{"- num_gpus,gpu_ram-,compute_cap", []SortKey{{"count", true}, {"vram", true}, {"compute_cap", false}}},
	}
	for _, tt := range tests {
		got, err := ParseSort(tt.in)
		if err != nil {
			t.Errorf("ParseSort(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSort(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseSortErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"prce", `invalid sort key "prce": unknown field "prce" (did you mean "price"?; fields: gpu,`},
		{"price-,tosp-", `invalid sort key "tosp-": unknown field "tosp" (did you mean "tops"?`},
		{"--price", `unknown field "-price"`},
		{"price,,tops", `invalid sort order "price,,tops": empty key`},
		{"price,", "empty key"},
		{"-", "empty key"},
		{"executor", `invalid sort key "executor": executor is a set and has no order`},
	}
	for _, tt := range tests {
		_, err := ParseSort(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSort(%q) error %v, want one containing %q", tt.in, err, tt.want)
		}
	}
}

func TestSort(t *testing.T) {
	tests := []struct{ order, want string }{
		// Two offers cost 0.30: address breaks the tie.
		{"", "cpu rtx3060 l4 rtx4090b rtx4090a a100 h100 b200"},
		{"price", "cpu rtx3060 l4 rtx4090b rtx4090a a100 h100 b200"},
		{"price-", "b200 h100 a100 rtx4090a l4 rtx4090b rtx3060 cpu"},
		{"count-,price", "h100 b200 a100 rtx4090a rtx3060 l4 rtx4090b cpu"},
		{"region,vram-", "rtx3060 a100 l4 rtx4090a cpu b200 h100 rtx4090b"},
		// Versions: 10.0 first; the CPU-only offer's empty compute_cap last.
		{"compute_cap-", "b200 h100 l4 rtx4090a rtx4090b rtx3060 a100 cpu"},
		{"compute_cap", "cpu a100 rtx3060 l4 rtx4090a rtx4090b h100 b200"},
		// false before true; stake beyond 2^53 sorts exactly.
		{"online,stake-", "b200 rtx4090b l4 h100 a100 rtx4090a cpu rtx3060"},
		// Case-insensitive: "cpu" between B200 and H100_80GB.
		{"gpu", "a100 b200 cpu h100 l4 rtx3060 rtx4090a rtx4090b"},
		{"executor", ""}, // not sortable: ParseSort refuses it
	}
	for _, tt := range tests {
		keys, err := ParseSort(tt.order)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseSort(%q) accepted an unsortable field", tt.order)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseSort(%q): %v", tt.order, err)
		}
		// Whatever order the offers arrive in, the result is the same.
		base := fixture()
		for shift := range base {
			in := append(slices.Clone(base[shift:]), base[:shift]...)
			if shift%2 == 1 {
				slices.Reverse(in)
			}
			Sort(in, keys)
			if got := strings.Join(addresses(in), " "); got != tt.want {
				t.Errorf("Sort(%q) from rotation %d = %s, want %s", tt.order, shift, got, tt.want)
				break
			}
		}
	}
}

func TestSortStableAndIgnoresUnknownKeys(t *testing.T) {
	// Same address, same everything sorted on: input order is kept.
	in := []Offer{
		{Address: "gpu1x", Price: 1, Region: "first"},
		{Address: "gpu1x", Price: 1, Region: "second"},
		{Address: "gpu1a", Price: 2},
		{Address: "gpu1x", Price: 1, Region: "third"},
	}
	Sort(in, []SortKey{{Field: "price"}, {Field: "nonsense", Desc: true}, {Field: "executor"}})
	var got []string
	for _, o := range in {
		got = append(got, o.Address+"/"+o.Region)
	}
	if want := []string{"gpu1x/first", "gpu1x/second", "gpu1x/third", "gpu1a/"}; !slices.Equal(got, want) {
		t.Errorf("Sort = %v, want %v", got, want)
	}

	// No keys at all: address order.
	in = fixture()
	Sort(in, nil)
	if got, want := strings.Join(addresses(in), " "), "a100 b200 cpu h100 l4 rtx3060 rtx4090a rtx4090b"; got != want {
		t.Errorf("Sort(nil keys) = %s, want %s", got, want)
	}

	// Sort accepts aliases and any case in hand-built keys.
	in = fixture()
	Sort(in, []SortKey{{Field: "DPH", Desc: true}})
	if got := addresses(in)[0]; got != "b200" {
		t.Errorf("Sort(DPH desc) starts with %s, want b200", got)
	}
}

func TestSortKeyString(t *testing.T) {
	for _, s := range []string{"price", "price-", "compute_cap-"} {
		keys, err := ParseSort(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys[0].String(); got != s {
			t.Errorf("ParseSort(%q)[0].String() = %q", s, got)
		}
	}
}
