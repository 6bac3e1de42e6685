package devnet

import "testing"

// TestFaultyProviderAsksLeast: with --faulty, the first faulty provider
// asks less than every honest one, so that jobs go to it first and Proof
// of Sync catches it (issue 33: as the dearest, the README's provider-4
// was never picked, and its demo showed nothing); honest providers stay
// priced apart, and further faulty ones are not cheap (two cheap faulty
// providers would audit each other, and they commit the same wrong
// result).
func TestFaultyProviderAsksLeast(t *testing.T) {
	const def = 20_000
	for _, c := range []struct {
		n, faulty int
		want      []uint64 // providers 1…n
	}{
		{3, 0, []uint64{20_000, 25_000, 30_000}},
		{4, 1, []uint64{20_000, 25_000, 30_000, 2_000}},
		{3, 1, []uint64{20_000, 25_000, 2_000}},
		{4, 2, []uint64{20_000, 25_000, 2_000, 35_000}},
	} {
		for i := 1; i <= c.n; i++ {
			if got := providerAsk(def, i, c.n, c.faulty); got != c.want[i-1] {
				t.Errorf("--providers %d --faulty %d: provider-%d asks %d, want %d", c.n, c.faulty, i, got, c.want[i-1])
			}
		}
	}
}
