package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// pageParams are the documented parameters of every list.
var pageParams = []Param{
	{Name: "limit", Type: "integer", Min: 1, Max: apiwire.MaxPageLimit, Desc: fmt.Sprintf("items per page, 1 to %d (default %d)", apiwire.MaxPageLimit, apiwire.DefaultPageLimit)},
	{Name: "cursor", Type: "string", Desc: "where the page starts: the next_cursor of the previous page (opaque)"},
}

// pageLimit reads ?limit=; on failure it has written the error.
func pageLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	l := r.URL.Query().Get("limit")
	if l == "" {
		return apiwire.DefaultPageLimit, true
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > apiwire.MaxPageLimit {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("limit %q: want an integer from 1 to %d", l, apiwire.MaxPageLimit))
		return 0, false
	}
	return n, true
}

// uintCursor reads a cursor that is a non-negative integer (0 when
// absent); on failure it has written the error.
func uintCursor(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of this list (pass back next_cursor as given)", c))
		return 0, false
	}
	return n, true
}

func uintString(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}
