package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// chatRequest is the part of OpenAI's chat completion request that tinylm
// reads; other fields (frequency_penalty, tools, …) are accepted and
// ignored, as a model without them would.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []message      `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	N                   *int           `json:"n"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	Stop                stopField      `json:"stop"`
	Seed                *int64         `json:"seed"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type message struct {
	Role    string      `json:"role"`
	Content contentText `json:"content"`
}

// contentText is a message's content: a string, null, or an array of
// parts of which the text parts count ({"type":"text","text":…}).
type contentText string

func (c *contentText) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*c = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = contentText(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("a message's content: want a string or an array of content parts")
	}
	var all string
	for _, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("a message's content part of type %q: tinylm reads text parts only", p.Type)
		}
		all += p.Text
	}
	*c = contentText(all)
	return nil
}

// stopField is stop: a string, an array of strings, or null.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop: want a string or an array of strings")
	}
	*s = many
	return nil
}

// The responses, in OpenAI's shape.

type completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // chat.completion
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             usage    `json:"usage"`
	SystemFingerprint string   `json:"system_fingerprint"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role    string    `json:"role"`
	Content string    `json:"content"`
	Refusal *struct{} `json:"refusal"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"` // chat.completion.chunk
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the request asked
	// for usage (stream_options.include_usage), absent when it did not.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type modelList struct {
	Object string      `json:"object"` // list
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // model
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// apiError is OpenAI's error body: {"error":{"message","type","param","code"}}.
type apiError struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
