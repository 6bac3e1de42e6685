package apiserver

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// sampleParams fill path parameters with values the fake chain has.
func sampleParams() map[string]string {
	return map[string]string{
		"addr":   providerKeys[0].Addr.String(),
		"id":     "1",
		"hash":   strings.Repeat("a", 64),
		"height": "3",
	}
}

func fillPath(p string, params map[string]string) string {
	return regexp.MustCompile(`\{([a-z_]+)\}`).ReplaceAllStringFunc(p, func(m string) string {
		return params[m[1:len(m)-1]]
	})
}

func getDoc(t *testing.T, s *Server) map[string]any {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Body)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIMatchesRoutes checks the served document against the live
// mux both ways: every documented operation is served by the handler of
// that route (not the fallback), and every route the mux serves is
// documented. Mounted routes count too.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	mounted := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html></html>")) })
	s.Mount(Route{Method: "GET", Path: "/{$}", ID: "index", Tag: "dashboard", Summary: "the dashboard", RespType: "text/html", Handler: mounted},
		Route{Method: "GET", Path: "/ui/{file...}", ID: "asset", Tag: "dashboard", Summary: "an asset", PathParams: map[string]string{"file": "a file"}, RespType: "text/plain", Handler: mounted})
	doc := getDoc(t, s)
	if doc["openapi"] != "3.0.3" {
		t.Errorf("openapi = %v", doc["openapi"])
	}
	params := sampleParams()
	params["file"] = "app.js"
	documented := map[string]bool{}
	ids := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			op := op.(map[string]any)
			id := op["operationId"].(string)
			if ids[id] {
				t.Errorf("operationId %s used twice", id)
			}
			ids[id] = true
			req := httptest.NewRequest(strings.ToUpper(method), fillPath(path, params), nil)
			_, pattern := s.mux.Handler(req)
			if pattern == "/" || pattern == "" {
				t.Errorf("%s %s is documented but no route serves it", strings.ToUpper(method), path)
				continue
			}
			documented[pattern] = true
			if _, ok := op["responses"].(map[string]any)["500"]; !ok {
				t.Errorf("%s: the 500 error is not documented", id)
			}
		}
	}
	for _, rt := range s.Routes() {
		if p := rt.Method + " " + rt.Path; !documented[p] {
			t.Errorf("route %s (%s) is served but not in /openapi.json", p, rt.ID)
		}
	}
	if len(documented) != len(s.Routes()) {
		t.Errorf("%d documented patterns, %d routes", len(documented), len(s.Routes()))
	}
}

// TestResponsesMatchDocument calls every GET route with the fake chain's
// data, and some filters, later pages and bad requests, and checks each
// request and answer against the served document with kin-openapi's
// validator (openapi3filter): a request the document allows is one the
// server serves, the answer's status is documented, and its body matches
// the schema given for that status. A request the document rejects (a
// limit out of range, a job id that is not an integer) is one the server
// answers 400.
func TestResponsesMatchDocument(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	var txHash string
	for _, tr := range f.txs {
		txHash = tr.Hash
		break
	}
	params := sampleParams()
	params["hash"] = txHash
	type call struct {
		path, query string
		badRequest  bool // the document rejects it
	}
	var calls []call
	for path, item := range doc.Paths.Map() {
		if item.Get != nil {
			calls = append(calls, call{path: path})
		}
	}
	calls = append(calls,
		call{path: "/v1/jobs", query: "state=queued&limit=1"},
		call{path: "/v1/jobs", query: "owner=" + consumerKey.Addr.String() + "&limit=1&cursor=3"},
		call{path: "/v1/offers", query: "q=cpu>=2&sort=price-&all=true&limit=2"},
		call{path: "/v1/providers", query: "limit=2"},
		call{path: "/v1/txs", query: "limit=3"},
		call{path: "/v1/blocks", query: "limit=3&cursor=5"},
		call{path: "/v1/txs", query: "type=submit_job&limit=2"},
		call{path: "/v1/blocks", query: "tx_type=submit_job&event=job_submitted&limit=2"},
		call{path: "/v1/blocks", query: "tx_type=Bad"},
		call{path: "/v1/jobs/{id}/logs", query: "from=0&limit=512"},
		call{path: "/v1/jobs", query: "state=bogus"},
		call{path: "/v1/jobs/{id}", query: "x=1"},
		call{path: "/v1/accounts/{addr}", query: "addr=gpu1nope"},
		call{path: "/v1/blocks/{height}", query: "height=99"},
		call{path: "/v1/jobs", query: "limit=0", badRequest: true},
		call{path: "/v1/txs", query: "limit=1001", badRequest: true},
		call{path: "/v1/jobs/{id}/logs", query: "limit=513", badRequest: true},
		call{path: "/v1/jobs/{id}", query: "id=abc", badRequest: true},
		call{path: "/v1/blocks/{height}", query: "height=0", badRequest: true},
	)
	checked := 0
	for _, c := range calls {
		ps := maps.Clone(params)
		// name=value in the query of a path with {name} fills the path
		// instead.
		q := url.Values{}
		if c.query != "" {
			var err error
			if q, err = url.ParseQuery(c.query); err != nil {
				t.Fatal(err)
			}
		}
		for name := range ps {
			if v := q.Get(name); v != "" && strings.Contains(c.path, "{"+name+"}") {
				ps[name] = v
				q.Del(name)
			}
		}
		target := fillPath(c.path, ps)
		if len(q) > 0 {
			target += "?" + q.Encode()
		}
		req := httptest.NewRequest("GET", target, nil)
		item := doc.Paths.Value(c.path)
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: pathParamsOf(c.path, ps),
			Route:   &routers.Route{Spec: doc, Path: c.path, PathItem: item, Method: "GET", Operation: item.Get},
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		reqErr := openapi3filter.ValidateRequest(t.Context(), in)
		if (reqErr != nil) != c.badRequest {
			t.Errorf("GET %s: the document's verdict on the request: %v (want rejected: %v)", target, reqErr, c.badRequest)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if c.badRequest && rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400 for a request the document rejects", target, rec.Code)
		}
		if err := openapi3filter.ValidateResponse(t.Context(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: rec.Code, Header: rec.Header(), Body: io.NopCloser(rec.Body),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}); err != nil {
			t.Errorf("GET %s answered %d, not as documented: %v", target, rec.Code, err)
			continue
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("only %d answers checked", checked)
	}
}

// pathParamsOf returns the values of path's parameters.
func pathParamsOf(path string, params map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`\{([a-z_]+)\}`).FindAllStringSubmatch(path, -1) {
		out[m[1]] = params[m[1]]
	}
	return out
}

// do runs a request against s and decodes a JSON answer into out.
func do(t *testing.T, s http.Handler, method, url string, body []byte, hdr map[string]string, out any) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, url, r)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, rec.Code, rec.Body, err)
		}
	}
	return rec
}
