package ledger_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// FuzzOverlay drives two nested overlays on a MemKV with a byte script of
// sets, deletes, flushes, discards and range scans, and checks every read
// against a plain map model.
func FuzzOverlay(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(bytes.Repeat([]byte{0, 17, 34, 51, 68, 85, 102, 119, 136, 153}, 30))
	f.Fuzz(func(t *testing.T, script []byte) {
		base := ledger.NewMemKV()
		model := map[string]string{} // what inner should read
		outerModel := map[string]string{}
		for i := range 8 {
			k := string(rune('a' + 2*i))
			base.Apply([]ledger.Change{{Key: []byte(k), Value: []byte("base")}})
			model[k], outerModel[k] = "base", "base"
		}
		outer := ledger.NewOverlay(base)
		inner := ledger.NewOverlay(outer)
		for i := 0; i+1 < len(script); i += 2 {
			op, arg := script[i]%6, script[i+1]
			key := string(rune('a' + arg%16))
			switch op {
			case 0, 1:
				v := string(rune('A' + arg>>4))
				inner.Set([]byte(key), []byte(v))
				model[key] = v
			case 2:
				inner.Delete([]byte(key))
				delete(model, key)
			case 3:
				inner.Flush(outer)
				outerModel = cloneMap(model)
			case 4:
				inner.Discard()
				model = cloneMap(outerModel)
			case 5:
				lo, hi := string(rune('a'+arg%16)), string(rune('a'+arg>>4))
				var got, want []string
				inner.Iterate([]byte(lo), []byte(hi), func(k, v []byte) bool {
					got = append(got, string(k)+"="+string(v))
					return true
				})
				for k, v := range model {
					if k >= lo && k < hi {
						want = append(want, k+"="+v)
					}
				}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: Iterate[%s,%s) = %v, want %v", i/2, lo, hi, got, want)
				}
			}
			if got, want := string(inner.Get([]byte(key))), model[key]; got != want {
				t.Fatalf("step %d: Get(%s) = %q, want %q", i/2, key, got, want)
			}
		}
		ch := inner.Changes()
		if !slices.IsSortedFunc(ch, func(a, b ledger.Change) int { return bytes.Compare(a.Key, b.Key) }) {
			t.Fatal("Changes not sorted")
		}
	})
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
