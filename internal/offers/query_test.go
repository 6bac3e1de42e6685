package offers

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// matchTests lists queries and the fixture offers (by address without the
// gpu1 prefix, in fixture order) each must match.
var matchTests = []struct {
	query string
	want  string
}{
	{"", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"   ", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"gpu=RTX_4090 count>=2 vram>=24 price<0.5 region=eu", "rtx4090a"},

	// strings: gpu, with its separator folding, region, address
	{"gpu=RTX_4090", "rtx4090a rtx4090b"},
	{"gpu==rtx_4090", "rtx4090a rtx4090b"},
	{`gpu="RTX 4090"`, "rtx4090a rtx4090b"},
	{`gpu='rtx-4090'`, "rtx4090a rtx4090b"},
	{"gpu=RTX", ""},
	{"gpu!=RTX_4090", "h100 a100 rtx3060 cpu b200 l4"},
	{"gpu in [RTX_4090, H100_80GB]", "h100 rtx4090a rtx4090b"},
	{"gpu in RTX_4090,H100_80GB", "h100 rtx4090a rtx4090b"},
	{`gpu in ["RTX 4090", 'h100 80gb']`, "h100 rtx4090a rtx4090b"},
	{"gpu in [ RTX_4090 ,\tL4 ]", "rtx4090a rtx4090b l4"},
	{"gpu notin [RTX_4090,cpu]", "h100 a100 rtx3060 b200 l4"},
	{"gpu in []", ""},
	{"gpu notin []", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"gpu=cpu", "cpu"},
	{"region=eu", "rtx4090a a100 cpu l4"},
	{"region=EU", "rtx4090a a100 cpu l4"},
	{`region="eu"`, "rtx4090a a100 cpu l4"},
	{"region=us", ""},
	{"region!=eu", "h100 rtx4090b rtx3060 b200"},
	{"region in ['us-east',us-west]", "h100 rtx4090b b200"},
	{"region notin eu,asia", "h100 rtx4090b b200"},
	{"address=GPU1L4", "l4"},

	// tee: a kind, any or none
	{"tee=tdx", "h100"},
	{"tee=TDX", "h100"},
	{"tee=sev-snp", "a100"},
	{"tee=any", "h100 a100"},
	{"tee=none", "rtx4090a rtx4090b rtx3060 cpu b200 l4"},
	{"tee!=tdx", "rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"tee!=any", "rtx4090a rtx4090b rtx3060 cpu b200 l4"},
	{"tee in [tdx,none]", "h100 rtx4090a rtx4090b rtx3060 cpu b200 l4"},
	{"tee=any gpu=A100_80GB", "a100"},
	{"tee_expiry>=1700600000", "h100"},

	// integers, including a float operand and negative values
	{"count>=2", "h100 rtx4090a a100 b200"},
	{"count>2", "h100 a100 b200"},
	{"count<1", "cpu"},
	{"count<=1", "rtx4090b rtx3060 cpu l4"},
	{"count=8", "h100 b200"},
	{"count==8", "h100 b200"},
	{"count!=1", "h100 rtx4090a a100 cpu b200"},
	{"count in [2,4]", "rtx4090a a100"},
	{"count notin 0,1", "h100 rtx4090a a100 b200"},
	{"count>=1.5", "h100 rtx4090a a100 b200"},
	{"count<-1", ""},
	{"count>-1", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"cpu>=32", "h100 a100 cpu b200"},
	{"jobs=0", "rtx4090a rtx3060 b200"},
	{"max_jobs>=4", "h100 a100 cpu b200"},
	{"stake>=1000000", "h100 rtx4090a a100 b200 l4"},
	{"stake>=1e6", "h100 rtx4090a a100 b200 l4"},
	{"stake=0", "rtx3060"},
	// Exact beyond float64's 53 bits: as floats these two are equal.
	{"stake>18446744073709551614", "l4"},
	{"stake=18446744073709551615", "l4"},
	{"stake<0", ""},

	// floats
	{"price<0.5", "rtx4090a rtx4090b rtx3060 cpu l4"},
	{"price<=0.30", "rtx4090b rtx3060 cpu l4"},
	{"price<.3", "rtx3060 cpu"},
	{"price>=1.2", "h100 a100 b200"},
	{"price>4", ""},
	{"price=0.3", "rtx4090b l4"},
	{"price!=0.3", "h100 rtx4090a a100 rtx3060 cpu b200"},
	{"price in [0.01, 4]", "cpu b200"},
	{"reputation>=0.9", "h100 rtx4090a a100 b200"},
	{"uptime>=0.95", "h100 rtx4090a a100 cpu b200"},
	{"tops>1000", "h100 rtx4090a a100 b200"},
	{"bandwidth>=1e3", "h100 rtx4090a rtx4090b a100 b200"},

	// sizes and units
	{"vram>=24", "h100 rtx4090a rtx4090b a100 b200 l4"},
	{"vram>=24GiB", "h100 rtx4090a rtx4090b a100 b200 l4"},
	{"vram>=24gb", "h100 rtx4090a rtx4090b a100 b200 l4"},
	{"vram>=25.8GB", "h100 a100 b200"}, // 25.8e9 bytes is 24.03 GiB
	{"vram>=0.1TiB", "b200"},
	{"vram<=12288MiB", "rtx3060 cpu"},
	{"vram<12000mb", "cpu"},
	{"vram=80", "h100 a100"},
	{"vram!=80", "rtx4090a rtx4090b rtx3060 cpu b200 l4"},
	{"vram in [24GiB, 80]", "h100 rtx4090a rtx4090b a100 l4"},
	{`vram>="80GiB"`, "h100 a100 b200"},
	{"ram>=256 disk>=1000", "h100 a100 b200"},
	{"disk>1TB", "h100 a100 cpu b200"},
	{"disk>1TiB", "h100 b200"},
	{"disk>=1e3GiB", "h100 a100 cpu b200"},

	// sets
	{"executor=oci", "h100 rtx4090a a100 rtx3060 b200 l4"},
	{"executor=OCI", "h100 rtx4090a a100 rtx3060 b200 l4"},
	{"executor=wasm", "rtx4090a rtx4090b rtx3060 cpu l4"},
	{"executor!=oci", "rtx4090b cpu"},
	{"executor in [oci,wasm]", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},
	{"executor in gpu,wasm", "rtx4090a rtx4090b rtx3060 cpu l4"},
	{"executor notin [oci]", "rtx4090b cpu"},
	{"executor notin oci,wasm", ""},
	{"executor=oci executor=wasm", "rtx4090a rtx3060 l4"},

	// wasm engines: strings, quoted when they hold commas
	{`wasm_engine="wasmtime-39.0.1/linux-amd64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1"`, "rtx4090a rtx3060 cpu"},
	{"wasm_engine=wazero-1.12.0/linux-amd64/wasi-gpunet-1", "rtx4090b l4"},
	{"wasm_engine=WAZERO-1.12.0/LINUX-AMD64/WASI-GPUNET-1", "rtx4090b l4"},
	{"wasm_engine=wazero-1.12.0", ""},
	{"executor=wasm wasm_engine!=wazero-1.12.0/linux-amd64/wasi-gpunet-1", "rtx4090a rtx3060 cpu"},
	{`wasm_engine in [wazero-1.12.0/linux-amd64/wasi-gpunet-1, "wasmtime-39.0.1/linux-amd64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1"]`, "rtx4090a rtx4090b rtx3060 cpu l4"},
	{"wasm_engine notin [wazero-1.12.0/linux-amd64/wasi-gpunet-1]", "h100 rtx4090a a100 rtx3060 cpu b200"},

	// booleans
	{"online=true", "h100 rtx4090a a100 rtx3060 cpu l4"},
	{"online=TRUE", "h100 rtx4090a a100 rtx3060 cpu l4"},
	{"online=false", "rtx4090b b200"},
	{"online!=true", "rtx4090b b200"},
	{"online in [true,false]", "h100 rtx4090a rtx4090b a100 rtx3060 cpu b200 l4"},

	// versions: 10.0 > 9.0 and 8.10 > 8.9, unlike strings and decimals;
	// the CPU-only offer's empty compute_cap satisfies only != and notin.
	{"compute_cap>=9.0", "h100 b200"},
	{"compute_cap>9", "b200"},
	{"compute_cap=9", "h100"},
	{"compute_cap<9", "rtx4090a rtx4090b a100 rtx3060 l4"},
	{"compute_cap<=8.10", "rtx4090a rtx4090b a100 rtx3060 l4"},
	{"compute_cap>8.6", "h100 rtx4090a rtx4090b b200 l4"},
	{"compute_cap=8.9", "rtx4090a rtx4090b l4"},
	{"compute_cap!=8.9", "h100 a100 rtx3060 cpu b200"},
	{"compute_cap in [8.0,8.6]", "a100 rtx3060"},
	{"compute_cap notin [8.0,8.6]", "h100 rtx4090a rtx4090b cpu b200 l4"},

	// spacing, case and aliases
	{"vram >= 24   price < 0.5", "rtx4090a rtx4090b l4"},
	{"vram>= 24 price <0.5", "rtx4090a rtx4090b l4"},
	{"gpu=L4\nregion=eu", "l4"},
	{"VRAM>=80 GPU=b200", "b200"},
	{"num_gpus=1 gpu_ram=24", "rtx4090b l4"},
	{"gpu_name=L4", "l4"},
	{"dph<0.1", "rtx3060 cpu"},
	{"reliability>0.95", "h100 rtx4090a a100 b200"},
	{"cpu_cores>=64 cpu_ram>=512 disk_space>=2000", "h100 b200"},
	{"geolocation=asia", "rtx3060"},
	{"gpu_mem_bw>=8000", "b200"},
	{"gpu IN [L4] count NotIn [0]", "l4"},
}

func matching(q *Query) string {
	var got []string
	for _, o := range fixture() {
		if q.Match(&o) {
			got = append(got, strings.TrimPrefix(o.Address, "gpu1"))
		}
	}
	return strings.Join(got, " ")
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		q, err := Parse(tt.query)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.query, err)
			continue
		}
		if got := matching(q); got != tt.want {
			t.Errorf("Parse(%q) matches [%s], want [%s]", tt.query, got, tt.want)
		}
	}
}

// TestStringRoundTrip checks that the canonical form of every query in the
// match table parses back to a query that matches the same offers and has
// the same canonical form.
func TestStringRoundTrip(t *testing.T) {
	for _, tt := range matchTests {
		q, err := Parse(tt.query)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.query, err)
		}
		s := q.String()
		q2, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%q).String() = %q, which does not parse: %v", tt.query, s, err)
			continue
		}
		if got := matching(q2); got != tt.want {
			t.Errorf("Parse(%q) matches [%s], want [%s] like Parse(%q)", s, got, tt.want, tt.query)
		}
		if s2 := q2.String(); s2 != s {
			t.Errorf("String not stable: %q → %q → %q", tt.query, s, s2)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"GPU == 'RTX 4090'   vram >= 24gib", "gpu=RTX_4090 vram>=24GiB"},
		{"gpu in RTX_4090,H100_80GB", "gpu in [RTX_4090,H100_80GB]"},
		{"num_gpus NOTIN [ 1 , 2 ]", "count notin [1,2]"},
		{"gpu in []", "gpu in []"},
		{"region='us east'", `region="us east"`},
		{`address='a"b'`, `address='a"b'`},
		{`region=""`, `region=""`},
		{"region='>x'", `region=">x"`},
		{"region='a,b' executor in ['[x]',y]", `region="a,b" executor in ["[x]",y]`},
		{"region=a=b", "region=a=b"},
		{"price<.50", "price<0.5"},
		{"price<+1.", "price<1"},
		{"price<1e-7", "price<1e-07"},
		{"price<1e30", "price<1e+30"},
		{"price<0.000001", "price<0.000001"},
		{"stake>=1e6", "stake>=1000000"},
		{"stake>=0001000", "stake>=1000"},
		{"stake<99999999999999999999999", "stake<1e+23"},
		{"count>=-0", "count>=0"},
		{"count>=-0.0", "count>=0"},
		{"count>-3", "count>-3"},
		{"vram>=1.5TB ram>=512mib disk>=2", "vram>=1.5TB ram>=512MiB disk>=2"},
		{"compute_cap>=09.00", "compute_cap>=9.0"},
		{"online=TRUE", "online=true"},
		{"dph<1 reliability>=0.9", "price<1 uptime>=0.9"},
	}
	for _, tt := range tests {
		q, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := q.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	var nilQ *Query
	if nilQ.String() != "" || !nilQ.Match(&Offer{}) {
		t.Error("a nil *Query should print as \"\" and match everything")
	}
}

// errorTests lists bad queries with the offending text (Term, at byte
// offset Pos) and a fragment of the message.
var errorTests = []struct {
	query string
	pos   int
	term  string
	msg   string
}{
	{"gpu=RTX_4090 vrm>=24", 13, "vrm", `unknown field "vrm" (did you mean "vram"?; fields: gpu, count, vram,`},
	{"prce<1", 0, "prce", `did you mean "price"?`},
	{"regoin=eu", 0, "regoin", `did you mean "region"?`},
	{"foo=1", 0, "foo", `unknown field "foo" (fields: gpu, count,`},
	{"vram>=24 GiB", 9, "GiB", "write a unit right after its number"},
	{"region=us east", 10, "east", `unknown field "east"`},
	{">=24", 0, ">=24", "expected a field name"},
	{"[a]", 0, "[a]", "expected a field name"},
	{"région=eu", 0, "région", `unknown field "région"`},
	{"gpu.name=x", 0, "gpu.name", `unknown field "gpu.name" (did you mean "gpu_name"?`},

	{"gpu", 0, "gpu", `missing operator after "gpu"; use one of < <= = != >= > in notin`},
	{"gpu RTX_4090", 0, "gpu", "missing operator"},
	{`gpu"RTX"`, 0, "gpu", "missing operator"},
	{"gpu inn [a]", 0, "gpu", "missing operator"},
	{"count=>2", 5, "=>", `unknown operator "=>"`},
	{"count===2", 5, "===", "unknown operator"},
	{"count!2", 5, "!", "unknown operator"},

	{"vram>=", 0, "vram>=", `missing value after "vram>="`},
	{"price <   ", 0, "price <", "missing value"},
	{"gpu in", 0, "gpu in", "missing value"},
	{"vram>= count>=2", 0, "vram>=", "missing value"},

	{"vram>=lots", 6, "lots", `bad number "lots" for vram`},
	{"price<0.5usd", 6, "0.5usd", `bad number "0.5usd" for price`},
	{"count>=1_000", 7, "1_000", "bad number"},
	{"price<0x10", 6, "0x10", "bad number"},
	{"price<inf", 6, "inf", "bad number"},
	{"price<NaN", 6, "NaN", "bad number"},
	{"price<.", 6, ".", "bad number"},
	{"price<1e400", 6, "1e400", "out of range"},
	{"vram<1e308TB", 5, "1e308TB", "out of range"},
	{`count="two"`, 6, `"two"`, "bad number"},
	{"count in [1,x]", 12, "x", `bad number "x" for count`},

	{"vram>=24XB", 8, "XB", `unknown unit "XB" for vram; use GiB, TiB, MiB, GB, TB or MB`},
	{`vram>="24 GiB"`, 9, " GiB", "unknown unit"},
	{"vram in 1GB,2QB", 13, "QB", "unknown unit"},

	{"gpu>=RTX_4090", 3, ">=", `operator ">=" does not apply to gpu (a string); use one of = != in notin`},
	{"region<eu", 6, "<", "does not apply to region"},
	{"executor>oci", 8, ">", "does not apply to executor (a set)"},
	{"online>false", 6, ">", "does not apply to online (a bool)"},
	{"tee=sgx", 4, "sgx", `bad value "sgx" for tee; use tdx, sev-snp, any, none`},
	{"tee in [tdx,nvidia-gpu]", 12, "nvidia-gpu", `bad value "nvidia-gpu" for tee`},
	{"tee>tdx", 3, ">", "does not apply to tee (a TEE kind)"},

	{"gpu in RTX_4090", 7, "RTX_4090", "operator in needs a list, e.g. gpu in [RTX_4090,…] or gpu=RTX_4090"},
	{`gpu notin "RTX 4090"`, 10, `"RTX 4090"`, "operator notin needs a list"},
	{"gpu=RTX_4090,L4", 4, "RTX_4090,L4", "a list needs operator in or notin"},
	{"gpu=[RTX_4090]", 4, "[RTX_4090]", "a list needs operator in or notin"},
	{"gpu=,", 4, ",", "a list needs operator in or notin"},

	{`gpu="RTX 4090`, 4, `"RTX 4090`, `unclosed " quote`},
	{`gpu in ['a,b]`, 8, `'a,b]`, "unclosed ' quote"},
	{"gpu in [RTX_4090,L4", 7, "[RTX_4090,L4", "unclosed ["},
	{"gpu in [RTX_4090, ", 7, "[RTX_4090, ", "unclosed ["},
	{"gpu in [RTX_4090 L4]", 17, "L4]", "expected , or ] in list"},
	{"gpu=RTX_4090]", 12, "]", "unexpected ]"},
	{"gpu=]", 4, "]", "unexpected ]"},
	{"gpu in [a]]", 10, "]", "unexpected ]"},
	{"gpu in a]", 8, "]", "unexpected ]"},
	{`gpu=RTX"4090"`, 7, `"4090"`, "unexpected quote"},
	{`gpu in [a"b"]`, 9, `"b"]`, "unexpected quote"},
	{`gpu="RTX"4090`, 9, "4090", `unexpected "4090" after "\"RTX\""`},
	{"gpu in [a,,b]", 10, ",b]", "empty list element"},
	{"gpu in [a,]", 10, "]", "empty list element"},
	{"gpu in a,", 9, "", "empty list element"},
	{"gpu in a,,b", 9, ",b", "empty list element"},
	{"gpu in [[a]]", 8, "[a]]", "lists do not nest"},

	{"online=yes", 7, "yes", `bad value "yes" for online; use true or false`},
	{"compute_cap>=sm_90", 13, "sm_90", "bad version"},
	{"compute_cap>=9..0", 13, "9..0", "bad version"},
	{"compute_cap>=99999999999999999999", 13, "99999999999999999999", "bad version"},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range errorTests {
		q, err := Parse(tt.query)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want an error", tt.query, q)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error %T, want *ParseError", tt.query, err)
			continue
		}
		if pe.Input != tt.query || pe.Pos != tt.pos || pe.Term != tt.term {
			t.Errorf("Parse(%q): Pos %d Term %q, want Pos %d Term %q", tt.query, pe.Pos, pe.Term, tt.pos, tt.term)
		}
		if !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("Parse(%q) message %q, want it to contain %q", tt.query, pe.Msg, tt.msg)
		}
	}
}

func TestParseErrorCaret(t *testing.T) {
	_, err := Parse("gpu=RTX_4090 vrm>=24")
	if err == nil {
		t.Fatal("no error")
	}
	want := `invalid offers query: unknown field "vrm" (did you mean "vram"?; fields: ` + fieldNames() + ")\n" +
		"  gpu=RTX_4090 vrm>=24\n" +
		"               ^^^"
	if got := err.Error(); got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}

	// Tabs and newlines print as spaces, and the caret counts runes, so it
	// stays under the bad text.
	_, err = Parse("region=\"é\"\tvrm>=24")
	lines := strings.Split(err.Error(), "\n")
	if got, want := lines[1], `  region="é" vrm>=24`; got != want {
		t.Errorf("input line %q, want %q", got, want)
	}
	if got, want := lines[2], "             ^^^"; got != want {
		t.Errorf("caret line %q, want %q", got, want)
	}

	_, err = Parse("vram>=")
	if got := err.Error(); !strings.HasSuffix(got, "\n  vram>=\n  ^^^^^^") {
		t.Errorf("missing value error:\n%s", got)
	}
	_, err = Parse("gpu in a,")
	if got := err.Error(); !strings.HasSuffix(got, "\n  gpu in a,\n           ^") {
		t.Errorf("error at end of input:\n%s", got)
	}
}

func TestSuggest(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"vrm", "vram"}, {"GPUS", "gpu"}, {"x", ""}, {"uptim", "uptime"}, {"numgpus", "num_gpus"}, {"zzzzzz", ""},
	} {
		if got := suggest(tt.in); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseSpacesAndTerms(t *testing.T) {
	q, err := Parse("  gpu=L4 \t\n count>=1  ")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(q.terms); got != 2 {
		t.Errorf("%d terms, want 2", got)
	}
	var zero Query
	if !zero.Match(&Offer{}) || !slices.Equal(addresses(Filter(fixture(), &zero)), addresses(fixture())) {
		t.Error("the zero Query should match everything")
	}
}

// The scheduler filters every provider with Match, so it must not allocate.
func TestMatchDoesNotAllocate(t *testing.T) {
	q, err := Parse(`gpu in ["RTX 4090",L4] region=EU executor=oci online=true compute_cap>=8.9 count>=1 stake>0 vram>=24GB price<1`)
	if err != nil {
		t.Fatal(err)
	}
	offers := fixture()
	allocs := testing.AllocsPerRun(100, func() {
		for i := range offers {
			q.Match(&offers[i])
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times per run over the fixture", allocs)
	}
	if got := matching(q); got != "rtx4090a l4" {
		t.Errorf("matches [%s], want [rtx4090a l4]", got)
	}
}
