package jobspec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// set replaces the top-level field key in src with "key: value", or
// appends it. A value of "" removes the field.
func set(src, key, value string) string {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, key+":") {
			if value == "" {
				lines = append(lines[:i], lines[i+1:]...)
			} else {
				lines[i] = key + ": " + value
			}
			return strings.Join(lines, "\n") + "\n"
		}
	}
	return src + key + ": " + value + "\n"
}

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// errorTests are specs with one problem each: the field it is reported at,
// the line (0: no position) and what the message must say. The minimal
// specs have 6 lines, so an appended field is on line 7.
var errorTests = []struct {
	name  string
	src   string
	field string
	line  int
	want  []string
}{
	// YAML itself.
	{"malformed", "name: [x\n", "", 1, []string{"invalid YAML", "']' not found"}},
	{"tab indent", "resources:\n\tcpu: 1\n", "", 2, []string{"invalid YAML", "not tabs"}},
	{"duplicate key", minimalWASM + "timeout: 2m\n", "", 7, []string{`"timeout" is given twice`, "line 6"}},
	{"not a mapping", "- name: x\n", "", 1, []string{"a spec is a mapping", "not a list"}},
	{"scalar document", "hello\n", "", 1, []string{"a spec is a mapping", `not the string "hello"`}},
	{"empty", "# nothing\n", "", 0, []string{"the spec is empty"}},
	{"two documents", minimalWASM + "---\nname: y\n", "", 8, []string{"one YAML document"}},
	{"invalid utf-8", minimalWASM + "region: \xff\n", "", 7, []string{"not valid UTF-8"}},
	{"deep nesting", "args: " + strings.Repeat("[", 40), "", 1, []string{"nested or indented too deeply"}},
	{"undefined alias", minimalWASM + "args: [*nope]\n", "args[0]", 7, []string{"nope"}},
	{"too large", minimalWASM + "args: [" + strings.Repeat("xxxxxxx, ", MaxSpecSize/9) + "x]\n", "", 0, []string{"larger than 64KiB", "inputs"}},

	// Unknown fields.
	{"misspelt field", set(minimalWASM, "timeout", "") + "timout: 10m\n", "timout", 6, []string{`unknown field "timout"`, `did you mean "timeout"?`}},
	{"misspelt nested field", minimalWASM + "resources:\n  gpus: {count: 1}\n", "resources.gpus", 8, []string{`did you mean "gpu"?`}},
	{"resource at top level", minimalWASM + "memory: 1GiB\n", "memory", 7, []string{`did you mean "resources.memory"?`}},
	{"input alias", minimalWASM + "inputs:\n  - path: /in\n    src: ./x\n", "inputs[0].src", 9, []string{`in inputs[0]`, `did you mean "from"?`}},
	{"gpu alias", minimalWASM + "resources:\n  gpu: {count: 1, vram: 24GiB}\n", "resources.gpu.vram", 8, []string{`did you mean "min_vram"?`}},
	{"unknown field", minimalWASM + "colour: blue\n", "colour", 7, []string{`unknown field "colour"`, "the fields are name, executor,"}},

	// Required fields.
	{"no name", set(minimalWASM, "name", ""), "name", 0, []string{"is required", "name: wordcount"}},
	{"no executor", set(minimalWASM, "executor", ""), "executor", 0, []string{"is required", `"wasm"`, `"oci"`}},
	{"no module", set(minimalWASM, "module", ""), "module", 0, []string{"is required for the wasm executor", ".wasm"}},
	{"no image", set(minimalOCI, "image", ""), "image", 0, []string{"is required for the oci executor", "@sha256:"}},
	{"no outputs", set(minimalWASM, "outputs", ""), "outputs", 0, []string{"at least one is required", "outputs: [/out]"}},
	{"empty outputs", set(minimalWASM, "outputs", "[]"), "outputs", 4, []string{"at least one is required"}},
	{"no max_price", set(minimalWASM, "max_price", ""), "max_price", 0, []string{"is required", "SYNC per hour"}},
	{"no timeout", set(minimalWASM, "timeout", ""), "timeout", 0, []string{"is required", "timeout: 10m"}},
	{"null timeout", set(minimalWASM, "timeout", "~"), "timeout", 6, []string{"is required"}},
	{"input without from", minimalWASM + "inputs:\n  - path: /in\n", "inputs[0].from", 8, []string{"is required", "local file or directory"}},
	{"input without path", minimalWASM + "inputs:\n  - from: ./x\n", "inputs[0].path", 8, []string{"is required", "/in/data.csv"}},
	{"null input", minimalWASM + "inputs:\n  -\n", "inputs[0]", 8, []string{"an input needs path and from"}},

	// Wrong types.
	{"name list", set(minimalWASM, "name", "[a, b]"), "name", 1, []string{"must be a string, not a list"}},
	{"resources scalar", minimalWASM + "resources: 4\n", "resources", 7, []string{"must be a mapping, not the number 4", "cpu: 1"}},
	{"outputs scalar", set(minimalWASM, "outputs", "/out"), "outputs", 4, []string{"must be a list", "outputs: [/out]"}},
	{"cpu string", minimalWASM + "resources: {cpu: two}\n", "resources.cpu", 7, []string{"must be a number", `"two"`}},
	{"cpu quoted", minimalWASM + "resources: {cpu: \"2\"}\n", "resources.cpu", 7, []string{"must be a number"}},
	{"gpu count fraction", minimalWASM + "resources: {gpu: {count: 1.5}}\n", "resources.gpu.count", 7, []string{"whole number"}},
	{"region_required yes", minimalWASM + "region: eu\nregion_required: yes\n", "region_required", 8, []string{"must be true or false"}},
	{"deterministic string", minimalWASM + "deterministic: \"true\"\n", "deterministic", 7, []string{"must be true or false"}},
	{"env list", minimalWASM + "env: [A=1]\n", "env", 7, []string{"must be a mapping", "LANG: C"}},
	{"env nested", minimalWASM + "env: {A: {b: 1}}\n", "env.A", 7, []string{"must be a string, not a mapping"}},
	{"input scalar", minimalWASM + "inputs: [/in]\n", "inputs[0]", 7, []string{"must be a mapping", "from: ./data.csv"}},
	{"args nested list", minimalWASM + "args: [[a]]\n", "args[0]", 7, []string{"must be a string, not a list"}},
	{"args null item", minimalWASM + "args: [a, ~]\n", "args[1]", 7, []string{`write "" for an empty string`}},
	{"timeout list", set(minimalWASM, "timeout", "[10m]"), "timeout", 6, []string{"must be a duration"}},
	{"max_price map", set(minimalWASM, "max_price", "{sync: 1}"), "max_price", 5, []string{"must be a price"}},

	// Resources.
	{"cpu negative", minimalWASM + "resources: {cpu: -1}\n", "resources.cpu", 7, []string{"must be more than 0"}},
	{"cpu zero", minimalWASM + "resources: {cpu: 0}\n", "resources.cpu", 7, []string{"must be more than 0"}},
	{"cpu absurd", minimalWASM + "resources: {cpu: 2000}\n", "resources.cpu", 7, []string{"more than the 1024"}},
	{"memory zero", minimalWASM + "resources: {memory: 0}\n", "resources.memory", 7, []string{"must be more than 0", "256MiB"}},
	{"memory absurd", minimalWASM + "resources: {memory: 10PiB}\n", "resources.memory", 7, []string{"10PiB is more than the maximum 4TiB"}},
	{"memory in bytes by mistake", minimalWASM + "resources: {memory: 256}\n", "resources.memory", 7, []string{"256B is less than the minimum 1MiB", "without a unit is bytes"}},
	{"memory negative", minimalWASM + "resources: {memory: -1}\n", "resources.memory", 7, []string{"negative"}},
	{"disk absurd", minimalWASM + "resources: {disk: 100TiB}\n", "resources.disk", 7, []string{"more than the maximum 64TiB"}},
	{"gpu count absurd", minimalWASM + "resources: {gpu: {count: 1000}}\n", "resources.gpu.count", 7, []string{"1000 GPUs is more than the 64"}},
	{"gpu count huge", minimalWASM + "resources: {gpu: {count: 99999999999999999999}}\n", "resources.gpu.count", 7, []string{"out of range"}},
	{"gpu count negative", minimalWASM + "resources: {gpu: {count: -1}}\n", "resources.gpu.count", 7, []string{"must not be negative"}},
	{"gpu model syntax", minimalWASM + "resources: {gpu: {count: 1, models: [\"RTX 4090!\"]}}\n", "resources.gpu.models[0]", 7, []string{"not a hardware class", "RTX_4090"}},
	{"gpu model long", minimalWASM + "resources: {gpu: {count: 1, models: [" + strings.Repeat("A", 33) + "]}}\n", "resources.gpu.models[0]", 7, []string{"up to 32"}},
	{"gpu model cpu", minimalWASM + "resources: {gpu: {count: 1, models: [cpu]}}\n", "resources.gpu.models[0]", 7, []string{"not a GPU class", "count: 0"}},
	{"gpu model twice", minimalWASM + "resources: {gpu: {count: 1, models: [L4, l4]}}\n", "resources.gpu.models[1]", 7, []string{"L4 is listed twice"}},
	{"gpu models without count", minimalWASM + "resources: {gpu: {models: [L4], min_vram: 8GiB}}\n", "resources.gpu.count", 7, []string{"is 0, but models and min_vram", "count: 1"}},
	{"min_vram without unit", minimalWASM + "resources: {gpu: {count: 1, min_vram: 24}}\n", "resources.gpu.min_vram", 7, []string{"less than the minimum", "24GiB"}},
	{"compute cap", minimalWASM + "resources: {gpu: {count: 1, min_compute_cap: ampere}}\n", "resources.gpu.min_compute_cap", 7, []string{"not a compute capability", `"8.0"`}},

	// Units.
	{"ambiguous unit", minimalWASM + "resources: {memory: 5G}\n", "resources.memory", 7, []string{`"G"`, "ambiguous", "GB", "GiB"}},
	{"unknown unit", minimalWASM + "resources: {memory: 12 parsecs}\n", "resources.memory", 7, []string{`unknown unit "parsecs"`, "MiB"}},
	{"size without number", minimalWASM + "resources: {disk: lots}\n", "resources.disk", 7, []string{"not a size", "256MiB"}},
	{"fraction of a byte", minimalWASM + "resources: {disk: 1.0000001KB}\n", "resources.disk", 7, []string{"not a whole number of bytes"}},
	{"float size", minimalWASM + "resources: {memory: 1.5}\n", "resources.memory", 7, []string{"needs a unit"}},
	{"timeout without unit", set(minimalWASM, "timeout", "600"), "timeout", 6, []string{"has no unit", "600s", "10m"}},
	{"timeout words", set(minimalWASM, "timeout", "10 minutes"), "timeout", 6, []string{"unknown unit", "10m"}},
	{"timeout garbage", set(minimalWASM, "timeout", "soon"), "timeout", 6, []string{"not a duration", "1h30m"}},
	{"timeout unit", set(minimalWASM, "timeout", "10min"), "timeout", 6, []string{"unknown unit", "s, m, h or d"}},
	{"price unit", set(minimalWASM, "max_price", "1 dollar"), "max_price", 5, []string{"not a price", "500000usync"}},

	// Executor, module and image.
	{"executor unknown", set(minimalWASM, "executor", "docker"), "executor", 2, []string{`"docker" is not an executor`, `did you mean "oci"?`}},
	{"executor case", set(minimalWASM, "executor", "WASM"), "executor", 2, []string{`did you mean "wasm"?`}},
	{"image without digest", set(minimalOCI, "image", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"), "image", 3, []string{
		"not pinned by digest", "pytorch/pytorch@sha256:<64 hex digits>", "gpunet image digest pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"}},
	{"image bad digest", set(minimalOCI, "image", "alpine@sha256:abc"), "image", 3, []string{`bad digest "sha256:abc"`, "64 lower-case hex digits"}},
	{"image sha512", set(minimalOCI, "image", "alpine@sha512:"+digest+digest), "image", 3, []string{"bad digest", "sha256:"}},
	{"image upper case", set(minimalOCI, "image", "Acme/App@sha256:"+digest), "image", 3, []string{"not an image reference", "lower case"}},
	{"image for wasm", minimalWASM + "image: alpine@sha256:" + digest + "\n", "image", 7, []string{"is for the oci executor"}},
	{"module for oci", minimalOCI + "module: ./x.wasm\n", "module", 7, []string{"is for the wasm executor"}},
	{"command for wasm", minimalWASM + "command: [run]\n", "command", 7, []string{"is for the oci executor", "args"}},
	{"network for wasm", minimalWASM + "network: true\n", "network", 7, []string{"wasm jobs have no network", "executor: oci"}},
	{"network not bool", minimalOCI + "network: yes please\n", "network", 7, []string{"true or false"}},
	{"bad blob", set(minimalWASM, "module", "sha256:xyz"), "module", 3, []string{"not a blob reference", "64 lower-case hex digits", "./sha256:xyz"}},
	{"upper-case blob", set(minimalWASM, "module", "sha256:"+strings.ToUpper(digest)), "module", 3, []string{"not a blob reference"}},
	{"home directory", set(minimalWASM, "module", "~/wc.wasm"), "module", 3, []string{"~ is not expanded"}},
	{"too many args", minimalOCI + "command: [run]\nargs: [" + strings.Repeat("a, ", 127) + "a]\n", "args", 8, []string{"129 entries together; at most 128"}},
	{"image name too long", set(minimalOCI, "image", strings.Repeat("a", 256)+"@sha256:"+digest), "image", 3, []string{"at most 255"}},
	{"NUL in args", minimalWASM + "args: [\"a\\0b\"]\n", "args[0]", 7, []string{"NUL"}},

	// Guest paths.
	{"input path relative", minimalWASM + "inputs: [{path: in/x, from: ./x}]\n", "inputs[0].path", 7, []string{"not absolute", `"/in/x"`}},
	{"input path dotdot", minimalWASM + "inputs: [{path: /in/../etc, from: ./x}]\n", "inputs[0].path", 7, []string{`contains ".."`}},
	{"input path unclean", minimalWASM + "inputs: [{path: /in//x/, from: ./x}]\n", "inputs[0].path", 7, []string{`write "/in/x"`}},
	{"input path root", minimalWASM + "inputs: [{path: /, from: ./x}]\n", "inputs[0].path", 7, []string{"cannot be / itself"}},
	{"duplicate input", minimalWASM + "inputs:\n  - {path: /in/x, from: ./a}\n  - {path: /in/x, from: ./b}\n", "inputs[1].path", 9, []string{"/in/x is already the path of inputs[0]"}},
	{"nested input", minimalWASM + "inputs:\n  - {path: /in/x/y, from: ./a}\n  - {path: /in/x, from: ./b}\n", "inputs[1].path", 9, []string{"contains inputs[0].path /in/x/y"}},
	{"input from home", minimalWASM + "inputs: [{path: /in, from: ~/data}]\n", "inputs[0].from", 7, []string{"~ is not expanded"}},
	{"output relative", set(minimalWASM, "outputs", "[out]"), "outputs[0]", 4, []string{"not absolute", `"/out"`}},
	{"output dotdot", set(minimalWASM, "outputs", "[/out/../..]"), "outputs[0]", 4, []string{`contains ".."`}},
	{"output twice", set(minimalWASM, "outputs", "[/out, /out]"), "outputs[1]", 4, []string{"listed twice"}},
	{"output inside output", set(minimalWASM, "outputs", "[/out, /out/log]"), "outputs[1]", 4, []string{"inside outputs[0] /out"}},
	{"checkpoint relative", minimalWASM + "checkpoint: ckpt\n", "checkpoint.path", 7, []string{"not absolute"}},
	{"checkpoint path relative", minimalWASM + "checkpoint: {path: ckpt, interval: 10m}\n", "checkpoint.path", 7, []string{"not absolute"}},
	{"checkpoint root", minimalWASM + "checkpoint: {path: /, interval: 10m}\n", "checkpoint.path", 7, []string{"cannot be / itself"}},
	{"checkpoint no path", minimalWASM + "checkpoint: {interval: 10m}\n", "checkpoint.path", 7, []string{"is required"}},
	{"checkpoint interval long", minimalWASM + "checkpoint: {path: /ckpt, interval: 2d}\n", "checkpoint.interval", 7, []string{"out of range", "1d"}},
	{"checkpoint interval fraction", minimalWASM + "checkpoint: {path: /ckpt, interval: 1.5s}\n", "checkpoint.interval", 7, []string{"whole seconds"}},
	{"checkpoint unknown key", minimalWASM + "checkpoint: {path: /ckpt, every: 10m}\n", "checkpoint.every", 7, []string{"interval"}},
	{"too many outputs", set(minimalWASM, "outputs", "["+outputsList(65)+"]"), "outputs", 4, []string{"at most 64"}},

	// Env.
	{"env key dash", minimalWASM + "env: {MY-VAR: 1}\n", `env["MY-VAR"]`, 7, []string{`"MY-VAR" is not a valid variable name`}},
	{"env key digit", minimalWASM + "env: {1A: x}\n", `env["1A"]`, 7, []string{"not starting with a digit"}},
	{"env NUL", minimalWASM + "env: {A: \"x\\0\"}\n", "env.A", 7, []string{"NUL"}},
	{"env name too long", minimalWASM + "env: {" + strings.Repeat("A", 129) + ": x}\n", "env." + strings.Repeat("A", 129), 7, []string{"at most 128"}},
	{"env too many", minimalWASM + "env: {" + envList(129) + "}\n", "env", 7, []string{"129 variables; at most 128"}},

	// Name.
	{"name spaces", set(minimalWASM, "name", "Word Count"), "name", 1, []string{"not a valid name", `e.g. "word-count"`}},
	{"name long", set(minimalWASM, "name", strings.Repeat("a", 65)), "name", 1, []string{"1 to 64"}},
	{"name leading dash", set(minimalWASM, "name", "-x"), "name", 1, []string{"starting with a letter or digit", `e.g. "x"`}},

	// Terms.
	{"verification unknown", minimalWASM + "verification: fulll\n", "verification", 7, []string{`"fulll" is not one of "none", "spot" or "full"`, `did you mean "full"?`}},
	{"tier unknown", minimalWASM + "tier: ondemand\n", "tier", 7, []string{`did you mean "on-demand"?`}},
	{"full not deterministic", minimalWASM + "verification: full\ndeterministic: false\n", "verification", 7, []string{"needs a deterministic job", "says deterministic: false", "spot or none"}},
	{"full oci by default", minimalOCI + "verification: full\n", "verification", 7, []string{"needs a deterministic job", "oci job is not deterministic unless", "add deterministic: true", "spot or none"}},
	{"timeout zero", set(minimalWASM, "timeout", "0s"), "timeout", 6, []string{"0s is shorter than the minimum 1s"}},
	{"timeout short", set(minimalWASM, "timeout", "500ms"), "timeout", 6, []string{"shorter than the minimum 1s"}},
	{"timeout long", set(minimalWASM, "timeout", "8d"), "timeout", 6, []string{"8d is longer than the maximum 7d"}},
	{"timeout negative", set(minimalWASM, "timeout", "-5m"), "timeout", 6, []string{"shorter than the minimum"}},
	{"price zero", set(minimalWASM, "max_price", "0"), "max_price", 5, []string{"must be more than 0"}},
	{"price negative", set(minimalWASM, "max_price", "-1"), "max_price", 5, []string{"negative"}},
	{"price too fine", set(minimalWASM, "max_price", "0.0000001"), "max_price", 5, []string{"finer than 1 usync"}},
	{"price absurd", set(minimalWASM, "max_price", "2e6"), "max_price", 5, []string{"more than the maximum 1000000 SYNC/h"}},
	{"region syntax", minimalWASM + "region: eu west\n", "region", 7, []string{"not a region", "us-east"}},
	{"region case", minimalWASM + "region: EU\n", "region", 7, []string{"not a region", `write "eu"`}},
	{"region required without region", minimalWASM + "region_required: true\n", "region_required", 7, []string{"no region is given"}},
}

func outputsList(n int) string {
	var b []string
	for i := range n {
		b = append(b, fmt.Sprintf("/o%d", i))
	}
	return strings.Join(b, ", ")
}

func envList(n int) string {
	var b []string
	for i := range n {
		b = append(b, fmt.Sprintf("V%d: x", i))
	}
	return strings.Join(b, ", ")
}

func TestErrors(t *testing.T) {
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.src), "/base")
			if err == nil {
				t.Fatalf("Parse succeeded:\n%s", mustYAML(t, s))
			}
			if s != nil {
				t.Errorf("Parse returned a spec with its error")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error %T %v, want a non-empty Errors", err, err)
			}
			if len(es) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(es), err)
			}
			e := es[0]
			if e.Field != tt.field || e.Line != tt.line {
				t.Errorf("error at field %q line %d, want field %q line %d:\n%v", e.Field, e.Line, tt.field, tt.line, e)
			}
			if e.Line > 0 && e.Column < 1 {
				t.Errorf("error has line %d but column %d", e.Line, e.Column)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Msg, w) {
					t.Errorf("message %q does not say %q", e.Msg, w)
				}
			}
			if tt.field != "" && !strings.Contains(e.Error(), tt.field+": ") {
				t.Errorf("Error() = %q does not name the field %q", e.Error(), tt.field)
			}
		})
	}
}

// TestCRLF: specs written on Windows report the same lines.
func TestCRLF(t *testing.T) {
	src := strings.ReplaceAll("# a comment\n"+minimalWASM+"timout: 1m\n", "\n", "\r\n")
	_, err := Parse([]byte(src), "")
	var e *Error
	if !errors.As(err, &e) || e.Field != "timout" || e.Line != 8 {
		t.Fatalf("Parse = %v; want an unknown field timout on line 8", err)
	}
}
