package offers

import (
	"slices"
	"testing"
)

// TestInterconnectQuery: the query, interconnect=nvlink count>=8,
// keeps the NVLinked machines of 8 or more GPUs only.
func TestInterconnectQuery(t *testing.T) {
	all := []Offer{
		{Address: "dgx", GPU: "H100_80GB", Count: 8, Interconnect: "nvlink"},
		{Address: "pcie8", GPU: "H100_80GB", Count: 8, Interconnect: "pcie"},
		{Address: "pair", GPU: "RTX_4090", Count: 2, Interconnect: "nvlink"},
		{Address: "one", GPU: "RTX_4090", Count: 1},
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"interconnect=nvlink count>=8", []string{"dgx"}},
		{"interconnect=NVLink", []string{"dgx", "pair"}},
		{"interconnect!=nvlink", []string{"pcie8", "one"}},
		{"interconnect in [nvlink,pcie] count>=2", []string{"dgx", "pcie8", "pair"}},
	} {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		var got []string
		for _, o := range Filter(all, q) {
			got = append(got, o.Address)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.q, got, tc.want)
		}
	}
}
