package jobspec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/gpunet/gpunet/internal/ledger"
)

// The spec is decoded from goccy/go-yaml's syntax tree rather than with its
// reflection decoder, so that every problem is reported at once, with the
// field's path and position, and so that numbers keep the text they were
// written with (max_price 0.1 is exactly 100000 usync, not a float's
// approximation of it).

// Limits on the shape of the YAML, which keep the parser's work small: its
// time grows with the square of nesting.
const (
	maxFlowDepth  = 32 // nested [ and {
	maxAliasDepth = 16 // aliases and merge keys followed in a row
	// maxBlockColumn bounds the column of a block list's "-" ("- - - x"
	// nests as deep as it is long).
	maxBlockColumn = 256
)

// position is where a field's value was written.
type position struct {
	line, col int
	given     bool // a value other than null or "" was written
}

// decoder turns a YAML syntax tree into a Spec, collecting errors.
type decoder struct {
	errs     Errors
	reported map[Error]*Error // errs, for finding repeats
	pos      map[string]position
	anchors  map[string][]*ast.AnchorNode // by name, in document order
}

// decode parses data into a Spec without validating it. The Spec is nil
// when the YAML is not a mapping at all.
func decode(data []byte) (*Spec, Errors) {
	if len(data) > MaxSpecSize {
		return nil, Errors{{Msg: fmt.Sprintf("the spec is larger than %s, the most allowed; put data in inputs", Bytes(MaxSpecSize))}}
	}
	// YAML reads \r\n and a lone \r as \n; so do we, before the lexer,
	// which counts lines wrongly after a comment ending in \r\n.
	src := strings.TrimPrefix(string(data), "\uFEFF")
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	if !utf8.ValidString(src) {
		line := 1 + strings.Count(src[:firstInvalidUTF8(src)], "\n")
		return nil, Errors{{Line: line, Column: 1, Msg: "the spec is not valid UTF-8 text"}}
	}
	f, err := parseYAML(src)
	if err != nil {
		return nil, Errors{err}
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, Errors{{Msg: "the spec is empty; it needs at least name, executor, module or image, outputs, max_price and timeout"}}
	case len(docs) > 1:
		p := nodePos(docs[1].Body)
		return nil, Errors{{Line: p.line, Column: p.col, Msg: "a spec is one YAML document, but a second one starts here (after ---)"}}
	}
	d := &decoder{reported: map[Error]*Error{}, pos: map[string]position{}, anchors: map[string][]*ast.AnchorNode{}}
	ast.Walk(d, docs[0].Body)
	s := d.spec(docs[0].Body)
	if s != nil {
		s.pos = d.pos
	}
	return s, d.errs
}

// parseYAML parses src into a syntax tree, after checking that it is not
// shaped to make the parser slow, and turning a panic on hostile input
// into an error.
func parseYAML(src string) (f *ast.File, e *Error) {
	defer func() {
		if r := recover(); r != nil {
			f, e = nil, &Error{Msg: fmt.Sprintf("invalid YAML: the parser failed on this input: %v", r)}
		}
	}()
	tokens := lexer.Tokenize(src)
	if tk := tooDeep(tokens); tk != nil {
		e = &Error{Msg: "lists and mappings are nested or indented too deeply"}
		if tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		return nil, e
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, syntaxError(err)
	}
	return f, nil
}

// tooDeep returns the token where flow collections nest deeper than
// maxFlowDepth, or where a block list or explicit key is indented past
// maxBlockColumn, or nil.
func tooDeep(tokens token.Tokens) *token.Token {
	depth := 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.SequenceEntryType, token.MappingKeyType:
			if tk.Position != nil && tk.Position.Column > maxBlockColumn {
				return tk
			}
		case token.SequenceStartType, token.MappingStartType:
			if depth++; depth > maxFlowDepth {
				return tk
			}
		case token.SequenceEndType, token.MappingEndType:
			depth = max(0, depth-1)
		}
	}
	return nil
}

func firstInvalidUTF8(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(s)
}

var dupKeyMsg = regexp.MustCompile(`^mapping key "(.*)" already defined at \[(\d+):(\d+)\]$`)

// syntaxError turns a parser error into an Error at its position.
func syntaxError(err error) *Error {
	var se *yaml.SyntaxError
	if !errors.As(err, &se) {
		return &Error{Msg: "invalid YAML: " + err.Error()}
	}
	e := &Error{Msg: "invalid YAML: " + se.Message}
	if se.Token != nil && se.Token.Position != nil {
		e.Line, e.Column = se.Token.Position.Line, se.Token.Position.Column
		if strings.Contains(se.Message, "'\t'") {
			e.Msg += " (YAML indents with spaces, not tabs)"
		}
	}
	if m := dupKeyMsg.FindStringSubmatch(se.Message); m != nil {
		e.Msg = fmt.Sprintf("%q is given twice (first at line %s, column %s)", m[1], m[2], m[3])
	}
	return e
}

// Visit records anchors, so that aliases can be resolved.
func (d *decoder) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		name := a.Name.GetToken().Value
		d.anchors[name] = append(d.anchors[name], a)
	}
	return d
}

func (d *decoder) errorf(field string, p position, format string, args ...any) *Error {
	e := &Error{Field: field, Line: p.line, Column: p.col, Msg: fmt.Sprintf(format, args...)}
	if old, ok := d.reported[*e]; ok {
		return old // the same node, resolved twice
	}
	d.reported[*e] = e
	d.errs = append(d.errs, e)
	return e
}

// resolve follows anchors, aliases, tags and explicit keys to the node
// holding a value. str is true when a !!str tag makes it a string
// whatever it looks like. It returns nil, after recording an error, when an
// alias cannot be resolved.
func (d *decoder) resolve(field string, n ast.Node) (v ast.Node, str bool) {
	for range maxAliasDepth {
		switch t := n.(type) {
		case *ast.AnchorNode:
			n = t.Value
		case *ast.TagNode:
			if t.Start != nil && (t.Start.Value == "!!str" || t.Start.Value == "tag:yaml.org,2002:str") {
				str = true
			}
			n = t.Value
		case *ast.MappingKeyNode:
			n = t.Value
		case *ast.AliasNode:
			a := d.anchorFor(t)
			if a == nil {
				name := ""
				if t.Value != nil {
					name = t.Value.GetToken().Value
				}
				d.errorf(field, nodePos(t), "alias *%s refers to no anchor &%s defined before it", name, name)
				return nil, false
			}
			n = a.Value
		default:
			return n, str
		}
	}
	d.errorf(field, nodePos(n), "aliases refer to aliases more than %d deep", maxAliasDepth)
	return nil, false
}

// anchorFor returns the anchor an alias refers to: the last one of its
// name defined before it.
func (d *decoder) anchorFor(al *ast.AliasNode) *ast.AnchorNode {
	if al.Value == nil {
		return nil
	}
	at := al.GetToken().Position.Offset
	var found *ast.AnchorNode
	for _, a := range d.anchors[al.Value.GetToken().Value] {
		if a.GetToken().Position.Offset < at {
			found = a
		}
	}
	return found
}

// nodePos returns where a node starts: its first key for a mapping.
func nodePos(n ast.Node) position {
	switch t := n.(type) {
	case nil:
		return position{}
	case *ast.MappingNode:
		if len(t.Values) > 0 {
			return nodePos(t.Values[0])
		}
	case *ast.MappingValueNode:
		if t.Key != nil {
			return nodePos(t.Key)
		}
	case *ast.LiteralNode:
		if t.Start != nil {
			return position{line: t.Start.Position.Line, col: t.Start.Position.Column}
		}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return position{}
	}
	return position{line: tk.Position.Line, col: tk.Position.Column}
}

// entry is one key and value of a mapping.
type entry struct {
	key   string
	pos   position // of the key
	value ast.Node
}

// mapping returns the entries of the mapping at field, with merge keys
// (<<) applied: keys written in the mapping override merged ones. It
// returns nil for null, and records an error for anything but a mapping.
func (d *decoder) mapping(field string, n ast.Node, example string) []entry {
	return d.mappingDepth(field, n, example, 0)
}

func (d *decoder) mappingDepth(field string, n ast.Node, example string, depth int) []entry {
	v, _ := d.resolve(field, n)
	var values []*ast.MappingValueNode
	switch t := v.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.MappingNode:
		values = t.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{t}
	default:
		d.typeError(field, v, "a mapping", example)
		return nil
	}
	var own, merged []entry
	for _, mv := range values {
		if mv.Key == nil {
			continue
		}
		if mv.Key.IsMergeKey() {
			if depth >= maxAliasDepth {
				d.errorf(field, nodePos(mv), "merge keys (<<) nest more than %d deep", maxAliasDepth)
				continue
			}
			src, _ := d.resolve(field, mv.Value)
			if seq, ok := src.(*ast.SequenceNode); ok {
				for _, item := range seq.Values {
					merged = append(merged, d.mappingDepth(field, item, example, depth+1)...)
				}
			} else {
				merged = append(merged, d.mappingDepth(field, mv.Value, example, depth+1)...)
			}
			continue
		}
		kp := nodePos(mv.Key)
		k, _ := d.resolve(field, mv.Key)
		key, ok := scalarText(k)
		if !ok {
			d.errorf(field, kp, "a key must be a plain name, not %s", describe(k))
			continue
		}
		own = append(own, entry{key: key, pos: kp, value: mv.Value})
	}
	// The first merged mapping that has a key wins, and the mapping's own
	// keys override all of them.
	seen := make(map[string]bool, len(own))
	for _, e := range own {
		seen[e.key] = true
	}
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			own = append(own, e)
		}
	}
	return own
}

// sequence returns the items of the list at field; nil for null or an
// empty list. It records an error for anything but a list.
func (d *decoder) sequence(field string, n ast.Node, example string) []ast.Node {
	v, _ := d.resolve(field, n)
	switch t := v.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.SequenceNode:
		if len(t.Values) == 0 {
			return nil // [] means the same as leaving the field out
		}
		return t.Values
	}
	d.typeError(field, v, "a list", example)
	return nil
}

// scalarText returns the text of a scalar: a string's value, or a number
// or boolean as written.
func scalarText(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return t.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return t.GetToken().Value, true
	}
	return "", false
}

// describe names a node's kind for error messages.
func describe(n ast.Node) string {
	switch t := n.(type) {
	case nil, *ast.NullNode:
		return "empty (null)"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(t)
		return fmt.Sprintf("the string %q", clip(s))
	case *ast.BoolNode:
		return "the boolean " + t.GetToken().Value
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "the number " + clip(t.GetToken().Value)
	}
	return "a " + n.Type().YAMLName()
}

func (d *decoder) typeError(field string, n ast.Node, want, example string) {
	msg := fmt.Sprintf("must be %s, not %s", want, describe(n))
	if example != "" {
		msg += "; e.g. " + example
	}
	d.errorf(field, nodePos(n), "%s", msg)
}

// mark records where field's value is.
func (d *decoder) mark(field string, keyPos position, n ast.Node) {
	p := keyPos
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode, *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
	default:
		p = nodePos(v) // a scalar: point at the value itself
	}
	switch t := v.(type) {
	case nil, *ast.NullNode:
	case *ast.StringNode:
		p.given = t.Value != ""
	default:
		p.given = true
	}
	d.pos[field] = p
}

// str decodes a string field. Numbers and booleans are taken as written,
// so that `name: 2024` is "2024".
func (d *decoder) str(field string, n ast.Node, example string) string {
	v, _ := d.resolve(field, n)
	if v == nil {
		return ""
	}
	if _, ok := v.(*ast.NullNode); ok {
		return ""
	}
	s, ok := scalarText(v)
	if !ok {
		d.typeError(field, v, "a string", example)
	}
	return s
}

// stringList decodes a list of strings.
func (d *decoder) stringList(field string, n ast.Node, example string) []string {
	items := d.sequence(field, n, example)
	if items == nil {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.mark(f, nodePos(item), item)
		v, _ := d.resolve(f, item)
		if _, ok := v.(*ast.NullNode); ok {
			d.errorf(f, nodePos(item), `is empty (null); write "" for an empty string`)
			continue
		}
		out = append(out, d.str(f, item, ""))
	}
	return out
}

// stringMap decodes a mapping of strings; null values are "".
func (d *decoder) stringMap(field string, n ast.Node, example string) map[string]string {
	entries := d.mapping(field, n, example)
	if len(entries) == 0 {
		return nil // {} means the same as leaving the field out
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		f := envField(field, e.key)
		d.mark(f, e.pos, e.value)
		out[e.key] = d.str(f, e.value, "")
	}
	return out
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envField is the path of an env variable: env.NAME, or env["odd name"].
func envField(field, key string) string {
	if identRE.MatchString(key) {
		return field + "." + key
	}
	return field + "[" + strconv.Quote(key) + "]"
}

// boolean decodes true or false.
func (d *decoder) boolean(field string, n ast.Node) (value, ok bool) {
	v, str := d.resolve(field, n)
	switch t := v.(type) {
	case nil, *ast.NullNode:
		return false, false
	case *ast.BoolNode:
		if !str {
			return t.Value, true
		}
	}
	d.typeError(field, v, "true or false", "")
	return false, false
}

// integer decodes a whole number.
func (d *decoder) integer(field string, n ast.Node, example string) int {
	v, str := d.resolve(field, n)
	switch t := v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.IntegerNode:
		if str {
			break
		}
		switch x := t.Value.(type) {
		case int64:
			if x >= math.MinInt32 && x <= math.MaxInt32 {
				return int(x)
			}
		case uint64:
			if x <= math.MaxInt32 {
				return int(x)
			}
		}
		d.errorf(field, nodePos(v), "%s is far out of range", t.GetToken().Value)
		return 0
	case *ast.FloatNode:
		if !str {
			d.errorf(field, nodePos(v), "must be a whole number, not %s", t.GetToken().Value)
			return 0
		}
	case *ast.StringNode:
		// The parser leaves integers too large for 64 bits as strings.
		if t.Token != nil && t.Token.Type == token.StringType && strings.Trim(strings.TrimPrefix(t.Value, "-"), "0123456789") == "" && t.Value != "" {
			d.errorf(field, nodePos(v), "%s is far out of range", t.Value)
			return 0
		}
	}
	d.typeError(field, v, "a whole number", example)
	return 0
}

// number decodes a finite number.
func (d *decoder) number(field string, n ast.Node, example string) float64 {
	v, str := d.resolve(field, n)
	if !str {
		switch t := v.(type) {
		case nil, *ast.NullNode:
			return 0
		case *ast.IntegerNode:
			switch x := t.Value.(type) {
			case int64:
				return float64(x)
			case uint64:
				return float64(x)
			}
		case *ast.FloatNode:
			return t.Value
		}
	}
	d.typeError(field, v, "a number", example)
	return 0
}

// bytes decodes a size: an integer number of bytes or a string with a
// unit.
func (d *decoder) bytes(field string, n ast.Node, example string) Bytes {
	v, _ := d.resolve(field, n)
	switch t := v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			if x < 0 {
				d.errorf(field, nodePos(v), "%s is negative; e.g. %s", t.GetToken().Value, example)
				return 0
			}
			return Bytes(x)
		case uint64:
			return Bytes(x)
		}
	case *ast.FloatNode:
		d.errorf(field, nodePos(v), "%s needs a unit; e.g. %s (a number alone is bytes)", t.GetToken().Value, example)
		return 0
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(v)
		b, err := ParseBytes(s)
		if err != nil {
			d.errorf(field, nodePos(v), "%v", err)
		}
		return b
	}
	d.typeError(field, v, "a size", example)
	return 0
}

// duration decodes a duration string.
func (d *decoder) duration(field string, n ast.Node) Duration {
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode:
		s, _ := scalarText(v)
		t, err := ParseDuration(s)
		if err != nil {
			d.errorf(field, nodePos(v), "%v", err)
		}
		return t
	}
	d.typeError(field, v, "a duration", "10m or 1h30m")
	return 0
}

// price decodes a price from a number (SYNC) or a string with a unit. The
// number's text is read exactly, not as a float.
func (d *decoder) price(field string, n ast.Node) Price {
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode:
		s, _ := scalarText(v)
		p, err := ParsePrice(s)
		if err != nil {
			d.errorf(field, nodePos(v), "%v", err)
		}
		return p
	}
	d.typeError(field, v, "a price in SYNC per hour", "0.5 or 500000usync")
	return 0
}

// Fields of each mapping, in the order the docs list them.
var (
	specFields       = []string{"name", "executor", "module", "image", "command", "args", "env", "inputs", "outputs", "resources", "max_price", "timeout", "verification", "region", "region_required", "tier", "deterministic", "checkpoint", "network", "placement", "trust", "tee_measurements", "compare", "kind"}
	inputFields      = []string{"path", "from", "sha256", "size"}
	resourcesFields  = []string{"cpu", "memory", "disk", "gpu", "nodes", "shm"}
	gpuFields        = []string{"count", "models", "min_vram", "min_compute_cap", "interconnect"}
	placementFields  = []string{"region"}
	checkpointFields = []string{"path", "interval"}
	compareFields    = []string{"numeric", "program", "fuel"}
	numericFields    = []string{"rtol", "atol"}
)

// aliases are names people reach for, by the mapping they are written in,
// and the field they mean.
var aliases = map[string]map[string]string{
	"": {
		"cpu": "resources.cpu", "cpus": "resources.cpu", "memory": "resources.memory", "mem": "resources.memory",
		"ram": "resources.memory", "disk": "resources.disk", "gpu": "resources.gpu", "gpus": "resources.gpu",
		"price": "max_price", "max_cost": "max_price",
		"port": "ports", "expose": "ports", "replica": "replicas", "instances": "replicas", "scale": "replicas",
		"health": "readiness", "healthcheck": "readiness", "health_check": "readiness", "readiness_probe": "readiness",
		"type": "kind", "entrypoint": "command", "cmd": "command", "environment": "env", "wasm": "module",
		"input": "inputs", "output": "outputs", "deadline": "timeout", "time_limit": "timeout",
		"verify": "verification", "replication": "verification",
		"nodes": "resources.nodes", "num_nodes": "resources.nodes", "shm": "resources.shm",
	},
	"resources": {
		"cpus": "cpu", "cores": "cpu", "ram": "memory", "mem": "memory", "storage": "disk",
		"gpus": "gpu", "vram": "gpu.min_vram",
		"num_nodes": "nodes", "members": "nodes", "node_count": "nodes",
		"shm_size": "shm", "shared_memory": "shm", "dev_shm": "shm",
	},
	"resources.gpu": {
		"model": "models", "type": "models", "class": "models", "vram": "min_vram", "memory": "min_vram",
		"compute_cap": "min_compute_cap", "compute_capability": "min_compute_cap", "min_compute_capability": "min_compute_cap",
		"gpus": "count", "nvlink": "interconnect", "topology": "interconnect",
	},
	"ports[]": {
		"container_port": "port", "number": "port", "proto": "protocol",
	},
	"readiness": {
		"period": "interval", "every": "interval", "initial_delay": "start", "grace": "start", "startup": "start",
		"failures": "failure_threshold", "threshold": "failure_threshold", "url": "path",
	},
	"openai": {
		"model": "models",
	},
	"inputs[]": {
		"src": "from", "source": "from", "file": "from", "dest": "path", "target": "path", "to": "path", "mount": "path",
	},
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// unknown records an unknown field, with the field meant when it can tell.
func (d *decoder) unknown(parent string, e entry, fields []string) {
	field := e.key
	if parent != "" {
		field = parent + "." + e.key
	}
	where := "the spec"
	if parent != "" {
		where = parent
	}
	group := indexRE.ReplaceAllString(parent, "[]")
	meant := suggest(e.key, fields)
	if meant == "" {
		meant = aliases[group][strings.ToLower(e.key)]
	}
	if meant == "" {
		d.errorf(field, e.pos, "unknown field %q in %s; the fields are %s", clip(e.key), where, strings.Join(fields, ", "))
		return
	}
	full := meant
	if parent != "" {
		full = parent + "." + meant
	}
	err := d.errorf(field, e.pos, "unknown field %q in %s; did you mean %q?", clip(e.key), where, meant)
	err.moot = full
}

// spec decodes the top-level mapping.
func (d *decoder) spec(n ast.Node) *Spec {
	v, _ := d.resolve("", n)
	switch v.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
	default:
		p := nodePos(v)
		d.errorf("", p, "a spec is a mapping of fields (name: …, executor: …), not %s", describe(v))
		return nil
	}
	s := &Spec{}
	entries := d.mapping("", n, "")
	fields := specFields
	for _, e := range entries {
		if e.key == "kind" {
			d.mark(e.key, e.pos, e.value)
			n := len(d.errs)
			if s.Kind = d.str(e.key, e.value, "kind: service"); len(d.errs) > n {
				s.Kind = kindInvalid
			}
			if s.Kind == KindService {
				fields = serviceFields
			}
		}
	}
	for _, e := range entries {
		f := e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "kind": // above
		case "ports":
			s.Ports = d.ports(f, e.value)
		case "readiness":
			s.Readiness = d.readiness(f, e.value)
		case "replicas":
			s.Replicas = d.integer(f, e.value, "replicas: 2")
		case "budget":
			s.Budget = d.amount(f, e.value)
		case "openai":
			s.OpenAI = d.openai(f, e.value)
		case "public":
			s.Public, _ = d.boolean(f, e.value)
		case "name":
			s.Name = d.str(f, e.value, "name: wordcount")
		case "executor":
			s.Executor = d.str(f, e.value, "executor: wasm")
		case "module":
			s.Module = d.localOrBlob(f, e.value, "module: ./wc.wasm")
		case "image":
			s.Image = d.str(f, e.value, "image: ghcr.io/org/app@sha256:…")
		case "command":
			s.Command = d.stringList(f, e.value, `command: ["python", "train.py"]`)
		case "args":
			s.Args = d.stringList(f, e.value, `args: ["/in/input.txt"]`)
		case "env":
			s.Env = d.stringMap(f, e.value, "env: {LANG: C}")
		case "inputs":
			s.Inputs = d.inputs(f, e.value)
		case "outputs":
			s.Outputs = d.stringList(f, e.value, "outputs: [/out]")
		case "resources":
			s.Resources = d.resources(f, e.value)
		case "max_price":
			s.MaxPrice = d.price(f, e.value)
		case "timeout":
			s.Timeout = d.duration(f, e.value)
		case "verification":
			s.Verification = d.str(f, e.value, "verification: spot")
		case "region":
			s.Region = d.str(f, e.value, "region: eu")
		case "region_required":
			s.RegionRequired, _ = d.boolean(f, e.value)
		case "tier":
			s.Tier = d.str(f, e.value, "tier: on-demand")
		case "deterministic":
			if b, ok := d.boolean(f, e.value); ok {
				s.Deterministic = &b
			}
		case "checkpoint":
			s.Checkpoint = d.checkpoint(f, e.value)
		case "network":
			s.Network, _ = d.boolean(f, e.value)
		case "placement":
			s.Placement = d.placement(f, e.value)
		case "trust":
			s.Trust = d.str(f, e.value, "trust: tee")
		case "tee_measurements":
			s.TEEMeasurements = d.stringList(f, e.value, "tee_measurements: [<96 hex digits>]")
		case "compare":
			s.Compare = d.compare(f, e.value)
		default:
			delete(d.pos, f)
			d.unknown("", e, fields)
		}
	}
	return s
}

// localOrBlob decodes a local path or a blob reference.
func (d *decoder) localOrBlob(field string, n ast.Node, example string) string {
	s := d.str(field, n, example)
	if s == "~" || strings.HasPrefix(s, "~/") {
		d.errorf(field, d.pos[field], "%q: ~ is not expanded here; write the path relative to the spec's directory, or absolute", clip(s))
	}
	return s
}

func (d *decoder) inputs(field string, n ast.Node) []Input {
	items := d.sequence(field, n, "inputs: [{path: /in/data.csv, from: ./data.csv}]")
	if items == nil {
		return nil
	}
	out := make([]Input, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.mark(f, nodePos(item), item)
		if v, _ := d.resolve(f, item); v != nil {
			if _, ok := v.(*ast.NullNode); ok {
				d.errorf(f, nodePos(item), "is empty; an input needs path and from, e.g. {path: /in/data.csv, from: ./data.csv}")
				continue
			}
		}
		for _, e := range d.mapping(f, item, "{path: /in/data.csv, from: ./data.csv}") {
			ff := f + "." + e.key
			d.mark(ff, e.pos, e.value)
			switch e.key {
			case "path":
				out[i].Path = d.str(ff, e.value, "path: /in/data.csv")
			case "from":
				out[i].From = d.localOrBlob(ff, e.value, "from: ./data.csv")
			case "sha256":
				out[i].SHA256 = d.str(ff, e.value, "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
			case "size":
				out[i].Size = d.bytes(ff, e.value, "size: 12MiB")
			default:
				delete(d.pos, ff)
				d.unknown(f, e, inputFields)
			}
		}
	}
	return out
}

// checkpoint decodes checkpoint: {path, interval}, or the older
// checkpoint: /path (the path, at the default interval).
func (d *decoder) checkpoint(field string, n ast.Node) *Checkpoint {
	const example = "checkpoint: {path: /ckpt, interval: 10m}"
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.StringNode, *ast.LiteralNode:
		d.pos[field+".path"] = d.pos[field]
		return &Checkpoint{Path: d.str(field, n, example)}
	}
	c := &Checkpoint{}
	for _, e := range d.mapping(field, n, example) {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "path":
			c.Path = d.str(f, e.value, "path: /ckpt")
		case "interval":
			c.Interval = d.duration(f, e.value)
		default:
			delete(d.pos, f)
			d.unknown(field, e, checkpointFields)
		}
	}
	return c
}

// compare decodes compare: {numeric: {rtol, atol}} or {program: PATH}. It is nil when
// compare is left out or empty, which is byte for byte.
func (d *decoder) compare(field string, n ast.Node) *Compare {
	const example = "compare: {numeric: {rtol: 1e-5, atol: 1e-8}}"
	v, _ := d.resolve(field, n)
	if _, null := v.(*ast.NullNode); v == nil || null {
		return nil
	}
	entries := d.mapping(field, n, example)
	if len(entries) == 0 {
		return nil // {} is the same as leaving compare out
	}
	c := &Compare{}
	for _, e := range entries {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "numeric":
			c.Numeric = &Numeric{}
			for _, e := range d.mapping(f, e.value, "numeric: {rtol: 1e-5, atol: 1e-8}") {
				ff := f + "." + e.key
				d.mark(ff, e.pos, e.value)
				switch e.key {
				case "rtol":
					c.Numeric.RTol = d.tolerance(ff, e.value)
				case "atol":
					c.Numeric.ATol = d.tolerance(ff, e.value)
				default:
					delete(d.pos, ff)
					d.unknown(f, e, numericFields)
				}
			}
		case "program":
			c.Program = d.localOrBlob(f, e.value, "program: ./same.wasm")
		case "fuel":
			c.Fuel = d.fuel(f, e.value)
		default:
			delete(d.pos, f)
			d.unknown(field, e, compareFields)
		}
	}
	return c
}

// fuel decodes a judge's fuel budget: a whole number from 1 to
// MaxJudgeFuel, written out (5000000000) or with an exponent (5e9).
func (d *decoder) fuel(field string, n ast.Node) uint64 {
	const example = "fuel: 5e9 or fuel: 5000000000"
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode:
	default:
		d.typeError(field, v, "a whole number", example)
		return 0
	}
	text, _ := scalarText(v)
	if u, err := strconv.ParseUint(text, 10, 64); err == nil {
		switch {
		case u < 1:
			d.errorf(field, nodePos(v), "%d is not a budget: give at least 1", u)
		case u > MaxJudgeFuel:
			d.errorf(field, nodePos(v), "%d is more than %d, the most any chain allows (its params.max_judge_fuel bounds it further)", u, uint64(MaxJudgeFuel))
		default:
			return u
		}
		return 0
	}
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err != nil && strings.Trim(text, "+-0123456789.eE") != "":
		d.typeError(field, v, "a whole number", example)
	case err != nil || f < 1:
		d.errorf(field, nodePos(v), "%s is not a budget: give at least 1", clip(text))
	case f > MaxJudgeFuel || f != math.Trunc(f):
		d.errorf(field, nodePos(v), "%s is not a whole number from 1 to %d", clip(text), uint64(MaxJudgeFuel))
	default:
		return uint64(f)
	}
	return 0
}

// MaxJudgeFuel is the most fuel a spec may give its judge program: the
// upper bound of params.max_judge_fuel (a chain's own value applies too).
const MaxJudgeFuel = ledger.MaxJudgeFuelLimit

// tolerance decodes a number in [0, 1] from its text, exactly: 1e-5 is
// 10^13 parts per 10^18, not a float's neighbour of it.
func (d *decoder) tolerance(field string, n ast.Node) Tolerance {
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		s, _ := scalarText(v)
		t, err := ParseTolerance(s)
		if err != nil {
			d.errorf(field, nodePos(v), "%v", err)
		}
		return t
	}
	d.typeError(field, v, "a number in [0, 1]", "1e-5 or 0.00001")
	return 0
}

func (d *decoder) resources(field string, n ast.Node) Resources {
	var r Resources
	for _, e := range d.mapping(field, n, "resources: {cpu: 1, memory: 256MiB}") {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "cpu":
			r.CPU = d.number(f, e.value, "cpu: 2 or cpu: 0.5")
		case "memory":
			r.Memory = d.bytes(f, e.value, "256MiB or 2GiB")
		case "disk":
			r.Disk = d.bytes(f, e.value, "1GiB or 20GB")
		case "gpu":
			r.GPU = d.gpu(f, e.value)
		case "nodes":
			r.Nodes = d.integer(f, e.value, "nodes: 3")
		case "shm":
			r.Shm = d.bytes(f, e.value, "16GiB")
		default:
			delete(d.pos, f)
			d.unknown(field, e, resourcesFields)
		}
	}
	return r
}

func (d *decoder) gpu(field string, n ast.Node) GPU {
	var g GPU
	for _, e := range d.mapping(field, n, "gpu: {count: 1, models: [RTX_4090], min_vram: 24GiB}") {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "count":
			g.Count = d.integer(f, e.value, "count: 1")
		case "models":
			g.Models = d.stringList(f, e.value, "models: [RTX_4090, A100_80GB]")
			for i, m := range g.Models {
				g.Models[i] = NormalizeGPUModel(m)
			}
		case "min_vram":
			g.MinVRAM = d.bytes(f, e.value, "24GiB")
		case "min_compute_cap":
			g.MinComputeCap = d.str(f, e.value, `min_compute_cap: "8.0"`)
			if !strings.Contains(g.MinComputeCap, ".") && g.MinComputeCap != "" && strings.Trim(g.MinComputeCap, "0123456789") == "" {
				g.MinComputeCap += ".0" // 9 means 9.0
			}
		case "interconnect":
			g.Interconnect = strings.ToLower(d.str(f, e.value, "interconnect: nvlink"))
		default:
			delete(d.pos, f)
			d.unknown(field, e, gpuFields)
		}
	}
	return g
}

// placement decodes placement: {region: eu}. It is nil when placement is
// left out or empty.
func (d *decoder) placement(field string, n ast.Node) *Placement {
	v, _ := d.resolve(field, n)
	if _, null := v.(*ast.NullNode); v == nil || null {
		return nil
	}
	pl := &Placement{}
	for _, e := range d.mapping(field, n, "placement: {region: eu}") {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "region":
			pl.Region = d.str(f, e.value, "region: eu")
		default:
			delete(d.pos, f)
			d.unknown(field, e, placementFields)
		}
	}
	return pl
}

// NormalizeGPUModel spells a GPU class the way the network does: trimmed,
// upper-case, with spaces and dashes as underscores ("rtx 4090" →
// "RTX_4090", "a100-80gb" → "A100_80GB").
func NormalizeGPUModel(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return '_'
		}
		return r
	}, strings.ToUpper(strings.TrimSpace(s)))
}
