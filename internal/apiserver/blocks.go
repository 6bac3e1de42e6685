package apiserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// listBlocks serves GET /v1/blocks: headers newest first. The cursor is
// the height the page starts at.
func (s *Server) listBlocks(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	from, ok := uintCursor(w, r)
	if !ok {
		return
	}
	hs, err := s.chain.Blocks(r.Context(), int64(from), limit+1)
	if err != nil {
		if timedOut(w, r) {
			return
		}
		writeError(w, http.StatusServiceUnavailable, 0, "block store: "+err.Error())
		return
	}
	out := apiwire.BlockList{Blocks: hs}
	if len(hs) > limit {
		out.Blocks, out.NextCursor = hs[:limit], strconv.FormatInt(hs[limit].Height, 10)
	}
	writeJSON(w, http.StatusOK, out)
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

// maxBlockScan bounds the block headers one page of txs walks; the page
// then ends early with a cursor to go on from.
const maxBlockScan = 5000

// listTxs serves GET /v1/txs: txs newest first. The cursor is
// "HEIGHT.INDEX" of the page's first tx.
func (s *Server) listTxs(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
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
			if timedOut(w, r) {
				return
			}
			writeError(w, http.StatusServiceUnavailable, 0, "block store: "+err.Error())
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
