package devnet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
)

// TestDevnetOffers runs a devnet whose three providers have different
// simulated GPUs (none, one RTX 4090, a DGX A100) and searches them the way
// `gpunet offers` does.
func TestDevnetOffers(t *testing.T) {
	home := t.TempDir()
	created, err := Setup(home, Options{BlockTime: 50 * time.Millisecond})
	if err != nil || !created {
		t.Fatalf("setup: created=%v err=%v", created, err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	ctx, stop := context.WithCancel(context.Background())
	sims := map[int]nvml.Interface{1: nvmlsim.Lib(nvmlsim.GPU{}, 0), 2: nvmlsim.Lib(nvmlsim.RTX4090, 1), 3: nvmlsim.DGXA100()}
	ps, err := RunProviders(ctx, home, d.APIURL, ProviderOptions{N: 3, Poll: 25 * time.Millisecond, NVML: func(i int) nvml.Interface { return sims[i] }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		if errs := ps.Wait(); len(errs) > 0 {
			t.Errorf("providers: %v", errs)
		}
	}()
	if err := ps.WaitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	cl := chainclient.New(d.APIURL)
	addr := func(i int) string { return ps.Agents[i-1].Status().Address }
	for _, tc := range []struct {
		query, sort string
		want        []int
	}{
		{"", "price", []int{1, 2, 3}}, // devnet prices rise with the provider number
		{"", "price-", []int{3, 2, 1}},
		{"count>=1", "count-", []int{3, 2}},
		{"gpu=A100_40GB count=8 region=ap-south", "", []int{3}},
		{"gpu=RTX_4090 vram>=24 region=us-east", "", []int{2}},
		{"gpu notin [RTX_4090,A100_40GB]", "", []int{1}},
		{"region in [eu,us-east]", "address", nil}, // order checked below
	} {
		got, err := cl.Offers(t.Context(), tc.query, tc.sort, false)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		var gotAddrs []string
		for _, o := range got {
			gotAddrs = append(gotAddrs, o.Address)
		}
		if tc.want == nil {
			want := []string{addr(1), addr(2)}
			slices.Sort(want)
			if !slices.Equal(gotAddrs, want) {
				t.Errorf("offers %q -o %s = %v, want %v", tc.query, tc.sort, gotAddrs, want)
			}
			continue
		}
		var want []string
		for _, i := range tc.want {
			want = append(want, addr(i))
		}
		if !slices.Equal(gotAddrs, want) {
			t.Errorf("offers %q -o %s = %v, want %v", tc.query, tc.sort, gotAddrs, want)
		}
	}
	all, err := cl.Providers(t.Context())
	if err != nil || len(all) != 3 {
		t.Fatalf("query providers: %d, %v", len(all), err)
	}
	for _, o := range all {
		if o.Stake == 0 || o.TOPS <= 0 || !o.Online || len(o.Executor) == 0 {
			t.Errorf("provider offer missing fields: %+v", o)
		}
	}
}
