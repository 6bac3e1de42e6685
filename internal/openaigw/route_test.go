package openaigw

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
)

func cand(id uint64, p byte, price uint64, lat time.Duration, inFlight int, rep uint64) candidate {
	return candidate{Service: &ledger.Service{ID: id}, Provider: provider(p), Price: price, Latency: lat, InFlight: inFlight, Reputation: rep}
}

func order(cs []candidate) []byte {
	var o []byte
	for _, c := range cs {
		o = append(o, c.Provider[1])
	}
	return o
}

func TestRank(t *testing.T) {
	const ms = time.Millisecond
	const good, half = maxReputation, maxReputation / 2
	for _, tc := range []struct {
		name string
		cs   []candidate
		want string // providers' second bytes, best first
	}{
		{"cheaper first", []candidate{cand(1, 1, 300, 0, 0, half), cand(1, 2, 100, 0, 0, half)}, "\x02\x01"},
		{"faster first", []candidate{cand(1, 1, 100, 80*ms, 0, half), cand(1, 2, 100, 20*ms, 0, half)}, "\x02\x01"},
		{"unmeasured tried before measured", []candidate{cand(1, 1, 100, 20*ms, 0, half), cand(1, 2, 100, 0, 0, half)}, "\x02\x01"},
		{"less loaded first", []candidate{cand(1, 1, 100, 0, 3, half), cand(1, 2, 100, 0, 1, half)}, "\x02\x01"},
		{"better reputation first", []candidate{cand(1, 1, 100, 0, 0, half), cand(1, 2, 100, 0, 0, good)}, "\x02\x01"},
		// A replica 10% dearer but 4x faster wins: price and latency weigh
		// the same, relative to the worst candidate.
		{"latency outweighs a small price gap", []candidate{cand(1, 1, 100, 80*ms, 0, half), cand(1, 2, 110, 20*ms, 0, half)}, "\x02\x01"},
		// A dial failure (failurePenalty) outweighs a price three times lower.
		{"failed replica last", []candidate{cand(1, 1, 100, failurePenalty, 0, half), cand(1, 2, 300, 30*ms, 0, half)}, "\x02\x01"},
		{"busy replica loses to idle dearer one", []candidate{cand(1, 1, 100, 20*ms, 8, half), cand(1, 2, 150, 20*ms, 0, half)}, "\x02\x01"},
		// Ties: by service id, then provider address.
		{"tie by service id", []candidate{cand(2, 1, 100, 0, 0, half), cand(1, 2, 100, 0, 0, half)}, "\x02\x01"},
		{"tie by provider", []candidate{cand(1, 3, 100, 0, 0, half), cand(1, 2, 100, 0, 0, half), cand(1, 1, 100, 0, 0, half)}, "\x01\x02\x03"},
		{"free replicas", []candidate{cand(1, 2, 0, 0, 0, half), cand(1, 1, 0, 0, 0, half)}, "\x01\x02"},
		{"reputation over the scale", []candidate{cand(1, 2, 0, 0, 0, 2*good), cand(1, 1, 0, 0, 0, good)}, "\x01\x02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rank(tc.cs)
			if got := string(order(tc.cs)); got != tc.want {
				t.Errorf("order %q, want %q (scores %v, %v)", got, tc.want, tc.cs[0].Score, tc.cs[1].Score)
			}
		})
	}
}

func TestRankScores(t *testing.T) {
	cs := []candidate{cand(1, 1, 100, 10*time.Millisecond, 1, maxReputation), cand(1, 2, 200, 40*time.Millisecond, 2, 0)}
	rank(cs)
	// 1: 0.5 price + 0.25 latency + 0.5 load + 0 reputation
	// 2: 1 + 1 + 1 + 0.5
	for i, want := range []float64{1.25, 3.5} {
		if got := cs[i].Score; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("score %d = %v, want %v", i, got, want)
		}
	}
}

func TestStatsEWMA(t *testing.T) {
	s := newStats()
	k := replicaKey{1, provider(1)}
	now := time.Unix(1000, 0)
	s.observe(k, 100*time.Millisecond, now)
	if l, _ := s.get(k); l != 100*time.Millisecond {
		t.Errorf("first sample: %v, want 100ms", l)
	}
	s.observe(k, 200*time.Millisecond, now)
	if l, _ := s.get(k); l != 130*time.Millisecond {
		t.Errorf("after 200ms: %v, want 130ms (alpha 0.3)", l)
	}
	end := s.begin(k, now)
	end2 := s.begin(k, now)
	if _, n := s.get(k); n != 2 {
		t.Errorf("in flight %d, want 2", n)
	}
	end()
	end() // a second call changes nothing
	if _, n := s.get(k); n != 1 {
		t.Errorf("in flight %d, want 1", n)
	}
	end2()
	// Old idle entries are pruned once there are many.
	for i := range statsPruneAt {
		s.observe(replicaKey{uint64(i + 10), address.Address{}}, time.Millisecond, now)
	}
	s.observe(replicaKey{99999, address.Address{}}, time.Millisecond, now.Add(2*statsKeep))
	if n := len(s.m); n != 1 {
		t.Errorf("%d entries after pruning, want 1", n)
	}
}

func TestUpstreamBodyKeepsStreamOptions(t *testing.T) {
	c, aerr := parseChatRequest([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1},"messages":[{"role":"user","content":"hi"}],"extra":[1]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	b, _, err := c.upstreamBody(false)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		StreamOptions map[string]any `json:"stream_options"`
		Extra         []int          `json:"extra"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.StreamOptions["include_usage"] != true || got.StreamOptions["x"] != 1.0 || len(got.Extra) != 1 {
		t.Errorf("upstream body %s: want include_usage true, x kept, extra kept", b)
	}
}

// FuzzParseChatRequest: any body is either refused with a 400 naming
// what is wrong, or accepted with a model, and an accepted one makes an
// upstream body that is valid JSON and parses again the same way.
func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		hello,
		`{"model":"m","stream":true,"messages":[{"role":"assistant"},{"role":"user","content":[{"type":"text","text":"x"}]}],"n":1,"max_tokens":3.0}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":null,"stream_options":null}`,
		`null`, `[]`, `{"model":""}`, `{"model":"m","messages":{}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":2}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":false,"top_logprobs":20}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":"yes","top_logprobs":21}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, aerr := parseChatRequest(body)
		if aerr != nil {
			if aerr.Status != 400 || aerr.Message == "" {
				t.Fatalf("refusal %+v", aerr)
			}
			return
		}
		if c.Model == "" {
			t.Fatal("accepted without a model")
		}
		for _, logprobs := range []bool{false, true} {
			up, trim, err := c.upstreamBody(logprobs)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(up) {
				t.Fatalf("upstream body %q is not JSON", up)
			}
			c2, aerr := parseChatRequest(up)
			if aerr != nil || c2.Model != c.Model || c2.Stream != c.Stream {
				t.Fatalf("upstream body %q parses differently: %+v %v", up, c2, aerr)
			}
			switch {
			case !logprobs && (trim != nil || c2.Logprobs != c.Logprobs || c2.TopLogprobs != c.TopLogprobs):
				t.Fatalf("upstream body %q changed the log-probabilities asked for without being told to", up)
			case logprobs && (!c2.Logprobs || c2.TopLogprobs < checkTopLogprobs):
				t.Fatalf("upstream body %q: logprobs %v top %d, want true and at least %d", up, c2.Logprobs, c2.TopLogprobs, checkTopLogprobs)
			case logprobs && (trim == nil) != (c.Logprobs && c.TopLogprobs >= checkTopLogprobs):
				t.Fatalf("upstream body %q: trim %+v for a client that asked logprobs %v top %d", up, trim, c.Logprobs, c.TopLogprobs)
			}
		}
	})
}

func TestUpstreamBodyTakesTheValidatedDuplicate(t *testing.T) {
	c, aerr := parseChatRequest([]byte(`{"model":"a","model":"b","messages":[{"role":"user","content":"hi"}]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	b, _, _ := c.upstreamBody(false)
	var got struct{ Model string }
	json.Unmarshal(b, &got)
	if got.Model != c.Model || bytes.Count(b, []byte(`"model"`)) != 1 {
		t.Errorf("upstream body %s, want the one model %q the gateway validated", b, c.Model)
	}
}

// FuzzLogprobTrim: taking log-probabilities off a replica's answer (or
// chunk) never changes what its receipt hashes, keeps valid JSON valid,
// and leaves no alternatives past the top asked for.
func FuzzLogprobTrim(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"message":{"content":"a<b"},"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[{"token":"a","logprob":-1},{"token":"b","logprob":-2}]}],"refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
		`{"choices":[{"index":1,"delta":{"content":"é"},"logprobs":null}]}`,
		`{"choices":[{"index":0,"logprobs":{"content":[{"top_logprobs":"x"}]}}]}`,
		`{"choices":{}}`, `[]`, `{"choices":[{"logprobs":{"content":[{"top_logprobs":[1,2,3]}]}}]}`,
	} {
		f.Add([]byte(s), false, uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, drop bool, n uint8) {
		tr := &logprobTrim{drop: drop, top: int(n % 4)}
		out := tr.apply(data)
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("apply(%q) = %q: not JSON", data, out)
		}
		var a, b receipt.Outputs
		if a.Add(data) != nil {
			return
		}
		if err := b.Add(out); err != nil || a.Hash() != b.Hash() || a.Usage != b.Usage || a.CompletionTokens != b.CompletionTokens {
			t.Fatalf("apply(%q) = %q: the outputs changed (%v)", data, out, err)
		}
		// What a client reads (keys as OpenAI spells them).
		var top map[string]json.RawMessage
		var choices []map[string]json.RawMessage
		if json.Unmarshal(out, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil {
			return
		}
		for _, c := range choices {
			lp, ok := c["logprobs"]
			if !ok || isNull(lp) {
				continue
			}
			if drop {
				t.Fatalf("apply(%q) = %q: log-probabilities left", data, out)
			}
			var l map[string]json.RawMessage
			var toks []map[string]json.RawMessage
			if json.Unmarshal(lp, &l) != nil || json.Unmarshal(l["content"], &toks) != nil {
				continue
			}
			for _, tok := range toks {
				var alts []json.RawMessage
				if json.Unmarshal(tok["top_logprobs"], &alts) == nil && len(alts) > tr.top {
					t.Fatalf("apply(%q) = %q: %d alternatives, want at most %d", data, out, len(alts), tr.top)
				}
			}
		}
	})
}
