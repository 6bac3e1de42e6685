package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
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

// TestResponsesMatchSchemas calls every GET route with the fake chain's
// data and checks each answer against the schema the document gives for
// its status, so a handler that writes a field the document lacks (or
// misses a required one) fails here.
func TestResponsesMatchSchemas(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	doc := getDoc(t, s)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	calls := []struct{ method, path, query string }{}
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method == "get" {
				calls = append(calls, struct{ method, path, query string }{"GET", path, ""})
			}
		}
	}
	// Filters and later pages, and error answers.
	calls = append(calls,
		struct{ method, path, query string }{"GET", "/v1/jobs", "state=queued&limit=1"},
		struct{ method, path, query string }{"GET", "/v1/jobs", "owner=" + consumerKey.Addr.String() + "&limit=1&cursor=3"},
		struct{ method, path, query string }{"GET", "/v1/offers", "q=cpu>=2&sort=price-&all=true&limit=2"},
		struct{ method, path, query string }{"GET", "/v1/providers", "limit=2"},
		struct{ method, path, query string }{"GET", "/v1/txs", "limit=3"},
		struct{ method, path, query string }{"GET", "/v1/blocks", "limit=3&cursor=5"},
		struct{ method, path, query string }{"GET", "/v1/jobs/{id}", "x=1"},
		struct{ method, path, query string }{"GET", "/v1/jobs", "state=bogus"},
		struct{ method, path, query string }{"GET", "/v1/accounts/{addr}", "bad"},
	)
	checked := 0
	for _, c := range calls {
		p := fillPath(c.path, sampleParams())
		if c.query == "bad" {
			p, c.query = "/v1/accounts/gpu1nope", ""
		}
		if c.path == "/v1/txs/{hash}" {
			for _, tr := range f.txs {
				p = "/v1/txs/" + tr.Hash
				break
			}
		}
		url := p
		if c.query != "" {
			url += "?" + c.query
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, url, nil))
		op := doc["paths"].(map[string]any)[c.path].(map[string]any)[strings.ToLower(c.method)].(map[string]any)
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(rec.Code)].(map[string]any)
		if !ok {
			t.Errorf("%s %s answered %d, which its operation does not document: %s", c.method, url, rec.Code, rec.Body)
			continue
		}
		ct := strings.Split(rec.Header().Get("Content-Type"), ";")[0]
		media, ok := resp["content"].(map[string]any)[ct].(map[string]any)
		if !ok {
			t.Errorf("%s %s: content type %q not documented", c.method, url, ct)
			continue
		}
		if ct != "application/json" {
			continue
		}
		var v any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Errorf("%s %s: %v", c.method, url, err)
			continue
		}
		if err := validate(schemas, media["schema"].(map[string]any), v, "$"); err != nil {
			t.Errorf("%s %s (%d): %v\n%s", c.method, url, rec.Code, err, rec.Body)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("only %d answers checked", checked)
	}
}

// validate checks v against a JSON schema of the kind OpenAPI builds:
// type, properties, required, items, additionalProperties, nullable,
// enum, $ref and allOf.
func validate(defs map[string]any, s map[string]any, v any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		def, ok := defs[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: unknown schema %s", at, ref)
		}
		return validate(defs, def, v, at)
	}
	if v == nil {
		if s["nullable"] == true || len(s) == 0 {
			return nil
		}
		return fmt.Errorf("%s: null, but the schema is not nullable", at)
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			if err := validate(defs, sub.(map[string]any), v, at); err != nil {
				return err
			}
		}
		return nil
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	switch s["type"] {
	case nil:
		return nil
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want string", at, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want boolean", at, v)
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) {
			return fmt.Errorf("%s: %v, want integer", at, v)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return fmt.Errorf("%s: %T, want number", at, v)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want array", at, v)
		}
		for i, e := range a {
			if err := validate(defs, s["items"].(map[string]any), e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want object", at, v)
		}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := o[r.(string)]; !ok {
				return fmt.Errorf("%s: required %q missing", at, r)
			}
		}
		for k, e := range o {
			var sub map[string]any
			if ps, ok := props[k]; ok {
				sub = ps.(map[string]any)
			} else if ap, ok := s["additionalProperties"].(map[string]any); ok {
				sub = ap
			} else if props != nil {
				return fmt.Errorf("%s: %q is not in the schema", at, k)
			} else {
				continue
			}
			if err := validate(defs, sub, e, at+"."+k); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s: unknown schema type %v", at, s["type"])
	}
	return nil
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
