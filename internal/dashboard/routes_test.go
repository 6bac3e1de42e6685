package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/dashboard"
	"github.com/gpunet/gpunet/internal/netstats"
)

// TestPagesCallRoutesThatExist: every API path app.js reads (its api(…)
// calls, with each computed part as a sample value and query strings left
// off) is a route of the node's API or the dashboard's, so that a page
// cannot call a route that was never added or was renamed.
func TestPagesCallRoutesThatExist(t *testing.T) {
	js, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	// The node mounts the stats' and the dashboard's routes beside the
	// API's own (internal/daemon).
	routes := append(apiserver.New(nil, apiserver.Options{}).Routes(), dashboard.New(t.Context(), dashboard.Options{}).Routes()...)
	routes = append(routes, netstats.New(nil, netstats.Options{}).Routes()...)
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Path, noop)
	}
	calls := regexp.MustCompile(`api\(('/v1[^,)]*(?:\([^)]*\))?[^,)]*)`).FindAllStringSubmatch(string(js), -1)
	if len(calls) < 20 {
		t.Fatalf("found %d api() calls in app.js; the pattern lost some", len(calls))
	}
	lit := regexp.MustCompile(`^'([^']*)'$`)
	for _, c := range calls {
		var path strings.Builder
		for _, part := range strings.Split(c[1], "+") {
			part = strings.TrimSpace(part)
			switch m := lit.FindStringSubmatch(part); {
			case m != nil:
				path.WriteString(m[1])
			case strings.HasPrefix(part, "qs("):
			default:
				path.WriteString("x1") // an address, id or height
			}
		}
		p, _, _ := strings.Cut(path.String(), "?")
		p = strings.ReplaceAll(p, "x1", "1")
		served := false
		for _, method := range []string{"GET", "POST"} {
			if _, pattern := mux.Handler(httptest.NewRequest(method, p, nil)); pattern != "" {
				served = true
			}
		}
		if !served {
			t.Errorf("app.js calls %s (%s), which no route serves", p, c[1])
		}
	}
}
