package offers_test

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/offers"
)

// Filter and sort a market the way `gpunet offers 'QUERY' -o price-` does.
func Example() {
	market := []offers.Offer{
		{Address: "gpu1alice", GPU: "RTX_4090", Count: 2, VRAM: 24, Price: 0.35, Region: "eu", Executor: []string{"oci", "wasm"}},
		{Address: "gpu1bob", GPU: "RTX_4090", Count: 1, VRAM: 24, Price: 0.30, Region: "eu", Executor: []string{"wasm"}},
		{Address: "gpu1carol", GPU: "H100_80GB", Count: 8, VRAM: 80, Price: 2.50, Region: "eu", Executor: []string{"oci"}},
		{Address: "gpu1dave", GPU: "RTX_4090", Count: 4, VRAM: 24, Price: 0.30, Region: "eu", Executor: []string{"oci"}},
		{Address: "gpu1erin", GPU: "RTX_4090", Count: 2, VRAM: 24, Price: 0.25, Region: "us-east", Executor: []string{"oci"}},
	}
	q, err := offers.Parse(`gpu in ["RTX 4090", H100_80GB] vram>=24GiB region=eu executor=oci`)
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, err := offers.ParseSort("price-")
	if err != nil {
		fmt.Println(err)
		return
	}
	found := offers.Filter(market, q)
	offers.Sort(found, keys)

	fmt.Println(q)
	for _, o := range found {
		fmt.Printf("%-10s %-9s x%d %.2f SYNC/h\n", o.Address, o.GPU, o.Count, o.Price)
	}
	// Output:
	// gpu in [RTX_4090,H100_80GB] vram>=24GiB region=eu executor=oci
	// gpu1carol  H100_80GB x8 2.50 SYNC/h
	// gpu1alice  RTX_4090  x2 0.35 SYNC/h
	// gpu1dave   RTX_4090  x4 0.30 SYNC/h
}

// A query that does not parse says where and why.
func ExampleParse_error() {
	_, err := offers.Parse("gpu=RTX_4090 vram>=lots")
	fmt.Println(err)
	// Output:
	// invalid offers query: bad number "lots" for vram; want a size in GiB, or with a unit, e.g. 24 or 24GiB
	//   gpu=RTX_4090 vram>=lots
	//                      ^^^^
}
