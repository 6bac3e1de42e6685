package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// listBlocks serves GET /v1/blocks: headers newest first. The cursor is
// the height the page starts at. With ?tx_type= (a message type, or any)
// only blocks holding such a tx are listed, with ?event= only blocks where
// an event of that type happened (in a tx or in the block's own
// processing); a filtered page walks at most maxBlockScan blocks and may
// then end short, with a cursor to go on from.
func (s *Server) listBlocks(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	from, ok := uintCursor(w, r)
	if !ok {
		return
	}
	f, ok := blockFilterOf(w, r)
	if !ok {
		return
	}
	if f.none() {
		hs, err := s.chain.Blocks(r.Context(), int64(from), limit+1)
		if err != nil {
			s.blockStoreError(w, r, err)
			return
		}
		out := apiwire.BlockList{Blocks: hs}
		if len(hs) > limit {
			out.Blocks, out.NextCursor = hs[:limit], strconv.FormatInt(hs[limit].Height, 10)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	out := apiwire.BlockList{Blocks: []apiwire.BlockHeader{}}
	height := int64(from)
	for scanned := 0; scanned < maxBlockScan; {
		hs, err := s.chain.Blocks(r.Context(), height, min(100, maxBlockScan-scanned))
		if err != nil {
			s.blockStoreError(w, r, err)
			return
		}
		if len(hs) == 0 {
			break
		}
		for _, bh := range hs {
			if len(out.Blocks) == limit {
				out.NextCursor = strconv.FormatInt(bh.Height, 10)
				writeJSON(w, http.StatusOK, out)
				return
			}
			scanned++
			height = bh.Height - 1
			if f.txType != "" && bh.NumTxs == 0 {
				continue
			}
			b, err := s.chain.Block(r.Context(), bh.Height)
			if err != nil || b == nil {
				writeError(w, http.StatusServiceUnavailable, 0, fmt.Sprintf("block %d: %v", bh.Height, err))
				return
			}
			if f.matches(b) {
				out.Blocks = append(out.Blocks, bh)
			}
		}
		if height < 1 {
			break
		}
		if timedOut(w, r) {
			return
		}
	}
	if height >= 1 {
		out.NextCursor = strconv.FormatInt(height, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// blockFilter is what ?tx_type= and ?event= ask of a block.
type blockFilter struct {
	txType string // a message type, or anyTxType
	event  string
}

// anyTxType as ?tx_type= asks for blocks with at least one tx.
const anyTxType = "any"

func (f blockFilter) none() bool { return f.txType == "" && f.event == "" }

func (f blockFilter) matches(b *apiwire.Block) bool {
	if f.txType != "" && !slices.ContainsFunc(b.Txs, func(tx apiwire.BlockTx) bool { return f.txType == anyTxType || tx.Type == f.txType }) {
		return false
	}
	if f.event == "" {
		return true
	}
	has := func(evs []ledger.Event) bool {
		return slices.ContainsFunc(evs, func(e ledger.Event) bool { return e.Type == f.event })
	}
	return has(b.Events) || slices.ContainsFunc(b.Txs, func(tx apiwire.BlockTx) bool { return has(tx.Events) })
}

// typeName checks a message or event type named in the query: lower-case
// letters, digits and underscores (an unknown one matches nothing).
func typeName(w http.ResponseWriter, r *http.Request, param string) (string, bool) {
	v := r.URL.Query().Get(param)
	if len(v) > 64 || strings.TrimFunc(v, func(c rune) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' }) != "" {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("%s %q: want a type name in lower case, e.g. submit_job", param, v))
		return "", false
	}
	return v, true
}

func blockFilterOf(w http.ResponseWriter, r *http.Request) (blockFilter, bool) {
	var f blockFilter
	var ok bool
	if f.txType, ok = typeName(w, r, "tx_type"); !ok {
		return f, false
	}
	f.event, ok = typeName(w, r, "event")
	return f, ok
}

func (s *Server) blockStoreError(w http.ResponseWriter, r *http.Request, err error) {
	if timedOut(w, r) {
		return
	}
	writeError(w, http.StatusServiceUnavailable, 0, "block store: "+err.Error())
}

// block serves GET /v1/blocks/{height}.
func (s *Server) block(w http.ResponseWriter, r *http.Request) {
	h, err := strconv.ParseInt(r.PathValue("height"), 10, 64)
	if err != nil || h < 1 {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("height %q: want a positive integer", r.PathValue("height")))
		return
	}
	b, err := s.chain.Block(r.Context(), h)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, err.Error())
		return
	}
	if b == nil {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("this node has no block %d", h))
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// maxBlockScan bounds the block headers one page of txs, or of filtered
// blocks, walks; the page then ends early with a cursor to go on from.
const maxBlockScan = 5000

// listTxs serves GET /v1/txs: txs newest first, with ?type= only those
// of one message type. The cursor is "HEIGHT.INDEX" of the page's first
// tx.
func (s *Server) listTxs(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	typ, ok := typeName(w, r, "type")
	if !ok {
		return
	}
	var height int64
	index := -1 // all of the first block
	if c := r.URL.Query().Get("cursor"); c != "" {
		hs, is, found := strings.Cut(c, ".")
		h, err1 := strconv.ParseInt(hs, 10, 64)
		i, err2 := strconv.Atoi(is)
		if !found || err1 != nil || err2 != nil || h < 1 || i < 0 {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of this list (pass back next_cursor as given)", c))
			return
		}
		height, index = h, i
	}
	out := apiwire.TxList{Txs: []apiwire.TxEntry{}}
	scanned := 0
	for scanned < maxBlockScan {
		hs, err := s.chain.Blocks(r.Context(), height, min(100, maxBlockScan-scanned))
		if err != nil {
			s.blockStoreError(w, r, err)
			return
		}
		if len(hs) == 0 {
			break
		}
		for _, bh := range hs {
			scanned++
			height = bh.Height - 1
			if bh.NumTxs == 0 {
				index = -1
				continue
			}
			b, err := s.chain.Block(r.Context(), bh.Height)
			if err != nil || b == nil {
				writeError(w, http.StatusServiceUnavailable, 0, fmt.Sprintf("block %d: %v", bh.Height, err))
				return
			}
			top := len(b.Txs) - 1
			if index >= 0 {
				top = min(top, index)
			}
			index = -1
			for i := top; i >= 0; i-- {
				if typ != "" && b.Txs[i].Type != typ {
					continue
				}
				if len(out.Txs) == limit {
					out.NextCursor = fmt.Sprintf("%d.%d", bh.Height, i)
					writeJSON(w, http.StatusOK, out)
					return
				}
				out.Txs = append(out.Txs, apiwire.TxEntry{BlockTx: b.Txs[i], Height: b.Height, Time: b.Time})
			}
		}
		if height < 1 {
			break
		}
	}
	if height >= 1 && scanned >= maxBlockScan {
		out.NextCursor = fmt.Sprintf("%d.%d", height, 1<<30)
	}
	writeJSON(w, http.StatusOK, out)
}
