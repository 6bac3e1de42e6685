// Package typo measures how far apart two short strings are, so that error
// messages can say "did you mean …?" for a mistyped field name.
package typo

// Distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent bytes
// each cost one. Strings longer than 64 bytes are not typos of a name: they
// are as far apart as the longer one is long (unless equal), without the
// quadratic work.
func Distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
