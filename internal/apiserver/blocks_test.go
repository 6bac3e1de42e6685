package apiserver

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestListsFilterByType pages through /v1/txs?type= and /v1/blocks with
// tx_type and event at several page sizes: each lists exactly the txs or
// blocks of the fake chain that match, newest first, and nothing else.
func TestListsFilterByType(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})

	// What the chain holds, newest first.
	txsOf := func(typ string) []string {
		var out []string
		for i := len(f.blocks) - 1; i >= 0; i-- {
			for j := len(f.blocks[i].Txs) - 1; j >= 0; j-- {
				if tx := f.blocks[i].Txs[j]; typ == "" || tx.Type == typ {
					out = append(out, tx.Hash)
				}
			}
		}
		return out
	}
	blocksWhere := func(keep func(*apiwire.Block) bool) []string {
		var out []string
		for i := len(f.blocks) - 1; i >= 0; i-- {
			if keep(f.blocks[i]) {
				out = append(out, itoa(int(f.blocks[i].Height)))
			}
		}
		return out
	}
	txHashes := func(b []byte) ([]string, string) {
		var l apiwire.TxList
		mustJSON(t, b, &l)
		var out []string
		for _, tx := range l.Txs {
			out = append(out, tx.Hash)
		}
		return out, l.NextCursor
	}
	heights := func(b []byte) ([]string, string) {
		var l apiwire.BlockList
		mustJSON(t, b, &l)
		var out []string
		for _, h := range l.Blocks {
			out = append(out, itoa(int(h.Height)))
		}
		return out, l.NextCursor
	}
	flat := func(p [][]string) []string { return slices.Concat(p...) }

	if n := len(txsOf("submit_job")); n != 4 {
		t.Fatalf("the fake chain has %d submit_job txs, want 4", n)
	}
	for _, typ := range []string{"submit_job", "cancel_job", "stake", "no_such_type"} {
		for _, limit := range []int{1, 3, 100} {
			got := flat(pages(t, s, "/v1/txs?type="+typ, limit, txHashes))
			if want := txsOf(typ); !slices.Equal(got, want) {
				t.Errorf("/v1/txs?type=%s limit %d: %d txs %v, want %d %v", typ, limit, len(got), got, len(want), want)
			}
		}
	}

	hasTx := func(typ string) func(*apiwire.Block) bool {
		return func(b *apiwire.Block) bool {
			return slices.ContainsFunc(b.Txs, func(tx apiwire.BlockTx) bool { return typ == "any" || tx.Type == typ })
		}
	}
	hasEvent := func(typ string) func(*apiwire.Block) bool {
		return func(b *apiwire.Block) bool {
			for _, tx := range b.Txs {
				if slices.ContainsFunc(tx.Events, func(e ledger.Event) bool { return e.Type == typ }) {
					return true
				}
			}
			return slices.ContainsFunc(b.Events, func(e ledger.Event) bool { return e.Type == typ })
		}
	}
	for _, tc := range []struct {
		query string
		keep  func(*apiwire.Block) bool
		n     int // how many the fake chain has
	}{
		{"tx_type=submit_job", hasTx("submit_job"), 4},
		{"tx_type=cancel_job", hasTx("cancel_job"), 1},
		{"tx_type=any", hasTx("any"), len(f.blocks)},
		{"event=job_submitted", hasEvent("job_submitted"), 4},
		{"tx_type=stake&event=job_submitted", func(*apiwire.Block) bool { return false }, 0},
		{"tx_type=cancel_job&event=job_cancelled", hasTx("cancel_job"), 1},
	} {
		want := blocksWhere(tc.keep)
		if len(want) != tc.n {
			t.Fatalf("%s: the fake chain has %d such blocks, want %d: change the test", tc.query, len(want), tc.n)
		}
		for _, limit := range []int{1, 2, 100} {
			if got := flat(pages(t, s, "/v1/blocks?"+tc.query, limit, heights)); !slices.Equal(got, want) {
				t.Errorf("/v1/blocks?%s limit %d = %v, want %v", tc.query, limit, got, want)
			}
		}
	}
	// A filtered list starts where the cursor says.
	from := f.blocks[len(f.blocks)-3].Height
	want := blocksWhere(func(b *apiwire.Block) bool { return b.Height <= from && hasTx("submit_job")(b) })
	var got []string
	for cursor := itoa(int(from)); cursor != ""; {
		rec := do(t, s, "GET", "/v1/blocks?tx_type=submit_job&limit=1&cursor="+cursor, nil, nil, nil)
		var page []string
		page, cursor = heights(rec.Body.Bytes())
		got = append(got, page...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("submit_job blocks from %d = %v, want %v", from, got, want)
	}

	for _, url := range []string{"/v1/txs?type=Submit", "/v1/txs?type=a%20b", "/v1/blocks?tx_type=x-y", "/v1/blocks?event=" + strings.Repeat("a", 65)} {
		var eb apiwire.ErrorBody
		if rec := do(t, s, "GET", url, nil, nil, &eb); rec.Code != http.StatusBadRequest || eb.Code != apiwire.CodeInvalidArgument {
			t.Errorf("GET %s: %d %+v, want 400", url, rec.Code, eb)
		}
	}
}
