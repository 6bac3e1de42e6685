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

// upstreamBody is the body sent to a replica: the client's fields as
// validated (re-encoded, so that a replica whose JSON parser takes the
// first of two duplicate keys sees what the gateway checked), and for a
// request that streams, stream_options.include_usage set so that the
// stream ends with the usage chunk (the client's other stream options
// kept).
func (c *chatRequest) upstreamBody() ([]byte, error) {
	if !c.Stream {
		return json.Marshal(c.fields)
	}
	so := map[string]json.RawMessage{}
	if v, ok := c.fields["stream_options"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &so); err != nil {
			return nil, err
		}
	}
	so["include_usage"] = json.RawMessage("true")
	b, err := json.Marshal(so)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]json.RawMessage, len(c.fields)+1)
	for k, v := range c.fields {
		fields[k] = v
	}
	fields["stream_options"] = b
	return json.Marshal(fields)
}
