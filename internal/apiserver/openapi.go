package apiserver

import (
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// OpenAPI builds the OpenAPI 3.0 document of the server's routes. Schemas
// are derived from the Go types the handlers encode, by their JSON tags.
func (s *Server) OpenAPI() map[string]any {
	g := &schemaGen{defs: map[string]any{}, names: map[reflect.Type]string{}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes {
		path := openAPIPath(rt.Path)
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(rt.Method)] = g.operation(rt)
	}
	// The error codes are a closed set.
	g.schema(reflect.TypeOf(apiwire.ErrorBody{}))
	codes := make([]string, 0, len(apiwire.ErrorCodes))
	for c := range apiwire.ErrorCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	g.defs["ErrorBody"].(map[string]any)["properties"].(map[string]any)["code"] = map[string]any{"type": "string", "enum": codes}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "gpunet node API",
			"version": "1",
			"description": "JSON over HTTP, served by every node. Lists are paginated: ?limit= (default " +
				strconv.Itoa(apiwire.DefaultPageLimit) + ", at most " + strconv.Itoa(apiwire.MaxPageLimit) + ") and ?cursor= (the next_cursor of the " +
				"previous page; empty on the last). Errors are {code, message}, code one of a fixed set tied to the HTTP status. " +
				"Amounts are integers in usync. Routes marked with the bearer scheme need the node's api_token.",
		},
		// Relative: the node that serves the document.
		"servers": []any{map[string]any{"url": "/", "description": "this node"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"apiToken": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.OpenAPI())
}

var pathParamRE = regexp.MustCompile(`\{([a-zA-Z_]+)(\.\.\.)?\}`)

// openAPIPath turns a ServeMux pattern's path into OpenAPI's: {name...}
// becomes {name}, {$} goes.
func openAPIPath(p string) string {
	p = strings.ReplaceAll(p, "{$}", "")
	return pathParamRE.ReplaceAllString(p, "{$1}")
}

func (g *schemaGen) operation(rt Route) map[string]any {
	op := map[string]any{"operationId": rt.ID, "summary": rt.Summary, "tags": []string{rt.Tag}}
	var params []any
	for _, m := range pathParamRE.FindAllStringSubmatch(rt.Path, -1) {
		schema := map[string]any{"type": "string"}
		if intPathParams[m[1]] {
			schema = map[string]any{"type": "integer", "minimum": 1}
		}
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
			"description": rt.PathParams[m[1]], "schema": schema})
	}
	qs := rt.Query
	if rt.List {
		qs = append(slices.Clone(qs), pageParams...)
	}
	for _, q := range qs {
		in := q.In
		if in == "" {
			in = "query"
		}
		schema := map[string]any{"type": q.Type}
		if q.Min != 0 || q.Max != 0 {
			schema["minimum"] = q.Min
		}
		if q.Max != 0 {
			schema["maximum"] = q.Max
		}
		params = append(params, map[string]any{"name": q.Name, "in": in, "required": q.Required,
			"description": q.Desc, "schema": schema})
	}
	if params != nil {
		op["parameters"] = params
	}
	switch {
	case rt.Body != nil:
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.Body))}}}
	case rt.BodyType != "":
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			rt.BodyType: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
	}
	respType := rt.RespType
	if respType == "" {
		respType = "application/json"
	}
	content := map[string]any{}
	for _, ct := range strings.Split(respType, ",") {
		ct = strings.TrimSpace(ct)
		var respSchema any = map[string]any{"type": "string"}
		switch {
		case ct == "application/json" && rt.Resp != nil:
			respSchema = g.schema(reflect.TypeOf(rt.Resp))
		case ct == "application/octet-stream" || strings.HasPrefix(ct, "image/"):
			respSchema = map[string]any{"type": "string", "format": "binary"}
		}
		content[ct] = map[string]any{"schema": respSchema}
	}
	responses := map[string]any{
		strconv.Itoa(rt.Status): map[string]any{"description": http.StatusText(rt.Status), "content": content},
	}
	errs := append(slices.Clone(rt.Errors), http.StatusInternalServerError)
	if rt.Auth {
		errs = append(errs, http.StatusUnauthorized, http.StatusForbidden)
		op["security"] = []any{map[string]any{"apiToken": []string{}}}
	} else {
		op["security"] = []any{} // public: no token
	}
	if rt.Timeout > 0 {
		errs = append(errs, http.StatusGatewayTimeout)
	}
	if rt.MaxBody > 0 && (rt.Body != nil || rt.BodyType != "") {
		errs = append(errs, http.StatusRequestEntityTooLarge)
	}
	if rt.Body != nil || rt.BodyType != "" {
		errs = append(errs, http.StatusRequestTimeout) // the body's deadline
	}
	for _, st := range errs {
		responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st) + " (" + codeOf(st) + ")",
			"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(apiwire.ErrorBody{}))}}}
	}
	op["responses"] = responses
	if rt.Timeout > 0 {
		op["x-timeout"] = rt.Timeout.String()
	}
	if rt.Method != http.MethodGet {
		op["x-body-timeout"] = rt.BodyTimeout.String()
		if rt.BodyIdle > 0 {
			op["x-body-idle"] = rt.BodyIdle.String()
		}
	}
	if rt.MaxBody > 0 {
		op["x-max-body-bytes"] = rt.MaxBody
	}
	return op
}

// schemaGen turns Go types into JSON schemas, named structs into
// components.
type schemaGen struct {
	defs  map[string]any
	names map[reflect.Type]string
}

var (
	timeType          = reflect.TypeOf(time.Time{})
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	jsonMarshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	rawMessageType    = reflect.TypeOf(json.RawMessage{})
)

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawMessageType:
		return map[string]any{}
	case t.Kind() != reflect.Pointer && t.Implements(textMarshalerType):
		return map[string]any{"type": "string"}
	case t.Implements(jsonMarshalerType):
		return map[string]any{} // any JSON
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schema(t.Elem())
		return nullable(s)
	case reflect.Interface:
		return map[string]any{}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		return map[string]any{"$ref": "#/components/schemas/" + g.define(t)}
	}
	panic(fmt.Sprintf("apiserver: no JSON schema for %s", t))
}

// nullable lets s be null too. OpenAPI 3.0's nullable acts only beside a
// type, so a reference (to a struct's schema, an object) is wrapped in an
// allOf with the type.
func nullable(s map[string]any) map[string]any {
	if len(s) == 0 {
		return s // any JSON value, null among them
	}
	if _, ref := s["$ref"]; ref {
		return map[string]any{"type": "object", "allOf": []any{s}, "nullable": true}
	}
	out := map[string]any{"nullable": true}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// define adds t's schema to the components and returns its name.
func (g *schemaGen) define(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	name := t.Name()
	if _, taken := g.defs[name]; taken || name == "" {
		// Another package's type of the same name: qualify it.
		pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
		name = strings.ToUpper(pkg[:1]) + pkg[1:] + t.Name()
	}
	g.names[t] = name
	props := map[string]any{}
	def := map[string]any{"type": "object", "properties": props}
	g.defs[name] = def // before the fields, which may refer to it
	var required []string
	g.fields(t, props, &required)
	if len(required) > 0 {
		slices.Sort(required)
		def["required"] = required
	}
	return name
}

// fields adds t's JSON fields (those of embedded structs included) to
// props.
func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		omit := strings.Contains(opts, "omitempty")
		if !omit {
			*required = append(*required, name)
			// nil slices and maps encode as null
			if k := f.Type.Kind(); k == reflect.Slice || k == reflect.Map {
				s = nullable(s)
			}
		}
		if strings.Contains(opts, "string") {
			s = map[string]any{"type": "string"}
		}
		props[name] = s
	}
}
