package openaigw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// roles are the message roles OpenAI's chat completions accept.
var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// chatRequest is a validated chat completion request: the body's fields as
// sent (unknown ones included, to pass through) and what the gateway needs
// of them.
type chatRequest struct {
	fields map[string]json.RawMessage
	Model  string
	Stream bool
	// Logprobs and TopLogprobs are what the client asked of the answer's
	// log-probabilities (TopLogprobs -1 when it did not say).
	Logprobs    bool
	TopLogprobs int
}

// parseChatRequest validates body as a chat completion request. It checks
// what a replica could not be trusted to reject the same way everywhere
// (the shape, the model, the messages, the sampling numbers' ranges) and
// leaves every other field to the replica.
func parseChatRequest(body []byte) (*chatRequest, *apiError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, invalid("", "We could not parse the JSON body of your request: it must be a JSON object (with model and messages).")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, invalid("", "We could not parse the JSON body of your request: %v.", err)
	}
	c := &chatRequest{fields: fields}

	model, ok := fields["model"]
	if !ok || isNull(model) {
		return nil, invalid("model", "You must provide a model parameter.")
	}
	if err := json.Unmarshal(model, &c.Model); err != nil {
		return nil, invalid("model", "Invalid type for 'model': expected a string.")
	}
	if c.Model == "" {
		return nil, invalid("model", "You must provide a model parameter: it is empty.")
	}
	if aerr := checkMessages(fields["messages"]); aerr != nil {
		return nil, aerr
	}

	for _, r := range []struct {
		name     string
		min, max float64
	}{
		{"temperature", 0, 2},
		{"top_p", 0, 1},
		{"presence_penalty", -2, 2},
		{"frequency_penalty", -2, 2},
	} {
		if aerr := checkNumber(fields, r.name, r.min, r.max); aerr != nil {
			return nil, aerr
		}
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if _, aerr := checkInt(fields, name, 1); aerr != nil {
			return nil, aerr
		}
	}
	if v, ok := fields["logprobs"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &c.Logprobs); err != nil {
			return nil, invalid("logprobs", "Invalid type for 'logprobs': expected a boolean, got %s.", snippet(v))
		}
	}
	c.TopLogprobs = -1
	if v, ok := fields["top_logprobs"]; ok && !isNull(v) {
		n, aerr := checkInt(fields, "top_logprobs", 0)
		if aerr != nil {
			return nil, aerr
		}
		if n > maxTopLogprobs {
			return nil, invalid("top_logprobs", "Invalid 'top_logprobs': integer above maximum value. Expected a value <= %d, but got %d instead.", maxTopLogprobs, n)
		}
		c.TopLogprobs = int(n)
	}
	if n, aerr := checkInt(fields, "n", 1); aerr != nil {
		return nil, aerr
	} else if n > 1 {
		return nil, invalid("n", "Invalid 'n': %d. The gpunet gateway answers one choice per request: n must be 1 (send n requests instead).", n)
	}

	if v, ok := fields["stream"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &c.Stream); err != nil {
			return nil, invalid("stream", "Invalid type for 'stream': expected a boolean, got %s.", snippet(v))
		}
	}
	if v, ok := fields["stream_options"]; ok && !isNull(v) {
		var so map[string]json.RawMessage
		if v[0] != '{' || json.Unmarshal(v, &so) != nil {
			return nil, invalid("stream_options", "Invalid type for 'stream_options': expected an object, got %s.", snippet(v))
		}
		if !c.Stream {
			return nil, invalid("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is true.")
		}
		if iu, ok := so["include_usage"]; ok && !isNull(iu) {
			var b bool
			if json.Unmarshal(iu, &b) != nil {
				return nil, invalid("stream_options.include_usage", "Invalid type for 'stream_options.include_usage': expected a boolean, got %s.", snippet(iu))
			}
		}
	}
	return c, nil
}

// checkMessages validates the messages array.
func checkMessages(v json.RawMessage) *apiError {
	if v == nil || isNull(v) {
		return invalid("messages", "Missing required parameter: 'messages'.")
	}
	var msgs []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &msgs) != nil {
		return invalid("messages", "Invalid type for 'messages': expected an array of message objects, got %s.", snippet(v))
	}
	if len(msgs) == 0 {
		return invalid("messages", "Invalid 'messages': empty array. Expected an array with at least one message.")
	}
	for i, m := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		var fields map[string]json.RawMessage
		if len(m) == 0 || m[0] != '{' || json.Unmarshal(m, &fields) != nil {
			return invalid(p, "Invalid type for '%s': expected an object with a role and content, got %s.", p, snippet(m))
		}
		var role string
		if r, ok := fields["role"]; !ok || isNull(r) {
			return invalid(p+".role", "Missing required parameter: '%s.role'.", p)
		} else if json.Unmarshal(r, &role) != nil || !roles[role] {
			return invalid(p+".role", "Invalid value for '%s.role': %s. Supported values are: 'system', 'user', 'assistant', 'tool' and 'developer'.", p, snippet(r))
		}
		content, ok := fields["content"]
		if !ok || isNull(content) {
			// An assistant message may carry tool calls instead of content.
			if role == "assistant" {
				continue
			}
			return invalid(p+".content", "Missing required parameter: '%s.content'.", p)
		}
		switch content[0] {
		case '"':
			var s string
			if json.Unmarshal(content, &s) != nil {
				return invalid(p+".content", "Invalid '%s.content': not a valid JSON string.", p)
			}
		case '[':
			var parts []struct {
				Type *string `json:"type"`
			}
			if json.Unmarshal(content, &parts) != nil {
				return invalid(p+".content", "Invalid type for '%s.content': expected a string or an array of content parts (objects with a type).", p)
			}
			if len(parts) == 0 {
				return invalid(p+".content", "Invalid '%s.content': empty array. Expected a string or at least one content part.", p)
			}
			for j, part := range parts {
				if part.Type == nil || *part.Type == "" {
					return invalid(fmt.Sprintf("%s.content[%d].type", p, j), "Missing required parameter: '%s.content[%d].type'.", p, j)
				}
			}
		default:
			return invalid(p+".content", "Invalid type for '%s.content': expected a string or an array of content parts, got %s.", p, snippet(content))
		}
	}
	return nil
}

// checkNumber checks that fields[name], when set and not null, is a number
// in [min, max].
func checkNumber(fields map[string]json.RawMessage, name string, min, max float64) *apiError {
	v, ok := fields[name]
	if !ok || isNull(v) {
		return nil
	}
	var f float64
	if !isNumber(v) || json.Unmarshal(v, &f) != nil || math.IsNaN(f) {
		return invalid(name, "Invalid type for '%s': expected a number, got %s.", name, snippet(v))
	}
	if f < min || f > max {
		return invalid(name, "Invalid '%s': %s. Expected a value between %g and %g.", name, snippet(v), min, max)
	}
	return nil
}

// checkInt checks that fields[name], when set and not null, is an integer
// of at least min, and returns it (0 when not set).
func checkInt(fields map[string]json.RawMessage, name string, min int64) (int64, *apiError) {
	v, ok := fields[name]
	if !ok || isNull(v) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		// 3.0 is an integer too in JSON's eyes.
		var f float64
		if !isNumber(v) || json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, invalid(name, "Invalid type for '%s': expected an integer, got %s.", name, snippet(v))
		}
		n = int64(f)
	}
	if n < min {
		return 0, invalid(name, "Invalid '%s': integer below minimum value. Expected a value >= %d, but got %d instead.", name, min, n)
	}
	return n, nil
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

func isNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// snippet is v for an error message, cut to a readable length.
func snippet(v json.RawMessage) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}

// maxTopLogprobs is the most alternatives per token a request may ask
// for (OpenAI's bound).
const maxTopLogprobs = 20

// checkTopLogprobs is how many alternatives per token the gateway asks a
// replica for when it asks for log-probabilities on the client's behalf:
// enough to see both candidates of a near tie (logprob.Equivalent). A node's
// witness probes (relay.Hub.WitnessProbe) ask for as many, so that they
// look like any request.
const checkTopLogprobs = 5

// upstreamBody is the body sent to a replica: the client's fields as
// validated (re-encoded, so that a replica whose JSON parser takes the
// first of two duplicate keys sees what the gateway checked), and for a
// request that streams, stream_options.include_usage set so that the
// stream ends with the usage chunk (the client's other stream options
// kept).
//
// With logprobs (a service whose answers are not declared bit-exact, and
// checks on) it also asks for the answer's log-probabilities, with at
// least checkTopLogprobs alternatives per token, whatever the client
// asked, so that every request, a checked copy included, is alike and
// any check can tell a near tie from a wrong answer; the trim it returns
// (nil when the client asked for as much) takes off the answer what the
// client did not ask for.
func (c *chatRequest) upstreamBody(logprobs bool) ([]byte, *logprobTrim, error) {
	fields := make(map[string]json.RawMessage, len(c.fields)+3)
	for k, v := range c.fields {
		fields[k] = v
	}
	if c.Stream {
		so := map[string]json.RawMessage{}
		if v, ok := c.fields["stream_options"]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &so); err != nil {
				return nil, nil, err
			}
		}
		so["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(so)
		if err != nil {
			return nil, nil, err
		}
		fields["stream_options"] = b
	}
	var trim *logprobTrim
	switch {
	case !logprobs:
	case !c.Logprobs:
		trim = &logprobTrim{drop: true}
	case c.TopLogprobs < checkTopLogprobs:
		trim = &logprobTrim{top: max(0, c.TopLogprobs)}
	}
	if trim != nil {
		fields["logprobs"] = json.RawMessage("true")
		fields["top_logprobs"] = json.RawMessage(strconv.Itoa(checkTopLogprobs))
	}
	b, err := json.Marshal(fields)
	return b, trim, err
}

// logprobTrim takes off an answer the log-probabilities the gateway asked
// for and the client did not: all of them (drop), or the alternatives of
// each token past the top the client asked for.
type logprobTrim struct {
	drop bool
	top  int
}

// apply returns the completion, or chunk of a streamed one, data without
// what t takes off; data itself when there is nothing to take off or it
// is not a completion (the relay judges that). Only choices[].logprobs
// change; the rest is re-encoded (keys sorted, no escapes added), and the
// outputs a receipt hashes stay the same.
func (t *logprobTrim) apply(data []byte) []byte {
	if t == nil {
		return data
	}
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil {
		return data
	}
	changed := false
	for _, ch := range choices {
		lp, ok := ch["logprobs"]
		if !ok || isNull(lp) {
			continue
		}
		if t.drop {
			ch["logprobs"], changed = json.RawMessage("null"), true
			continue
		}
		var l map[string]json.RawMessage
		if json.Unmarshal(lp, &l) != nil {
			continue
		}
		for _, k := range []string{"content", "refusal"} {
			var toks []map[string]json.RawMessage
			if json.Unmarshal(l[k], &toks) != nil || toks == nil {
				continue
			}
			cut := false
			for _, tok := range toks {
				var alts []json.RawMessage
				if json.Unmarshal(tok["top_logprobs"], &alts) != nil || len(alts) <= t.top {
					continue
				}
				tok["top_logprobs"], cut = encodeJSON(alts[:t.top]), true
			}
			if cut {
				l[k], changed = encodeJSON(toks), true
				ch["logprobs"] = encodeJSON(l)
			}
		}
	}
	if !changed {
		return data
	}
	top["choices"] = encodeJSON(choices)
	out := encodeJSON(top)
	if !json.Valid(out) {
		return data // not re-encoded (it cannot happen to what decoded)
	}
	return out
}

// encodeJSON encodes v (of values that encode) without escaping HTML's
// characters, as a replica wrote them.
func encodeJSON(v any) json.RawMessage {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
