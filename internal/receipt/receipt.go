// Package receipt is the signed receipt a service replica gives for each
// chat completion it answers (ledger.ServiceReceipt): how its hashes are
// taken from a request and an answer, its compact form in the
// Gpunet-Receipt header, and the agent's side that signs one for every
// answer its replica gives (Proxy). Nodes check receipts against what they
// relayed, keep those they sampled, and bring three of them to the ledger
// in a MsgServiceDispute when two replicas of other operators answered a
// request otherwise (docs/ledger.md, "Service disputes").
package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// Header is the response header (a trailer on a streamed answer) that
// carries a receipt, in Encode's form.
const Header = "Gpunet-Receipt"

// Version is the first byte of an encoded receipt.
const Version = 2

// encodedLen is the length of an encoded receipt, before base64: the
// version, the service, the provider, four hashes, the two token counts,
// the time, the key and the signature.
const encodedLen = 1 + 8 + 20 + 4*32 + 3*8 + ed25519.PublicKeySize + ed25519.SignatureSize

// MaxEncoded is the longest header value Decode reads.
var MaxEncoded = base64.RawURLEncoding.EncodedLen(encodedLen)

// Encode is r's compact form, for a header: base64url (no padding) of the
// version byte and the fields in ServiceReceipt's order, fixed-size.
func Encode(r *ledger.ServiceReceipt) string {
	b := make([]byte, 0, encodedLen)
	b = append(b, Version)
	b = binary.BigEndian.AppendUint64(b, r.ServiceID)
	b = append(b, r.Provider[:]...)
	b = append(b, r.RequestHash[:]...)
	b = append(b, r.ResponseHash[:]...)
	b = append(b, r.ParamsHash[:]...)
	b = append(b, r.LogprobsHash[:]...)
	b = binary.BigEndian.AppendUint64(b, r.PromptTokens)
	b = binary.BigEndian.AppendUint64(b, r.CompletionTokens)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time))
	b = append(b, padded(r.PubKey, ed25519.PublicKeySize)...)
	b = append(b, padded(r.Sig, ed25519.SignatureSize)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func padded(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// Decode reads a receipt in Encode's form. It checks the form only: Verify
// checks the signature.
func Decode(s string) (*ledger.ServiceReceipt, error) {
	if len(s) != MaxEncoded {
		return nil, fmt.Errorf("receipt: %d characters, want %d (base64url of a version %d receipt)", len(s), MaxEncoded, Version)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("receipt: not base64url: %w", err)
	}
	if len(b) != encodedLen || b[0] != Version {
		return nil, fmt.Errorf("receipt: version %d, want %d", b[0], Version)
	}
	r := &ledger.ServiceReceipt{}
	b = b[1:]
	take := func(n int) []byte { v := b[:n]; b = b[n:]; return v }
	r.ServiceID = binary.BigEndian.Uint64(take(8))
	copy(r.Provider[:], take(20))
	copy(r.RequestHash[:], take(32))
	copy(r.ResponseHash[:], take(32))
	copy(r.ParamsHash[:], take(32))
	copy(r.LogprobsHash[:], take(32))
	r.PromptTokens = binary.BigEndian.Uint64(take(8))
	r.CompletionTokens = binary.BigEndian.Uint64(take(8))
	r.Time = int64(binary.BigEndian.Uint64(take(8)))
	r.PubKey = slices.Clone(take(ed25519.PublicKeySize))
	r.Sig = slices.Clone(take(ed25519.SignatureSize))
	if r.ServiceID == 0 || r.Time <= 0 {
		return nil, fmt.Errorf("receipt: service %d at time %d: both must be positive", r.ServiceID, r.Time)
	}
	if address.FromPubKey(r.PubKey) != r.Provider {
		return nil, fmt.Errorf("receipt: its key is not provider %s's", r.Provider)
	}
	return r, nil
}

// RequestHash is the hash a receipt carries of a request: SHA-256 of its
// body as the replica got it. A node sends a checked request's copy with
// the same bytes, so both replicas' receipts carry the same hash.
func RequestHash(body []byte) ledger.Hash { return sha256.Sum256(body) }

// paramFields are the request fields that decide how a model decodes.
var paramFields = []string{"model", "seed", "temperature", "top_p", "max_tokens", "max_completion_tokens",
	"presence_penalty", "frequency_penalty", "stop", "logit_bias", "n", "logprobs", "top_logprobs", "response_format"}

// ParamsHash is the hash of a request's decoding parameters: SHA-256 of a
// JSON object of those of paramFields it sets, each compacted, keys in
// order. A body that is not a JSON object hashes as an empty one.
func ParamsHash(body []byte) ledger.Hash {
	var fields map[string]json.RawMessage
	json.Unmarshal(body, &fields)
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range paramFields { // already in a fixed order
		v, ok := fields[f]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		fmt.Fprintf(&b, "%q:", f)
		if json.Compact(&b, v) != nil {
			b.WriteString("null")
		}
	}
	b.WriteByte('}')
	return sha256.Sum256(b.Bytes())
}

// Deterministic reports whether a request asks for a decoding that gives
// one answer: temperature 0, or a seed. Only such requests are checked.
func Deterministic(body []byte) bool {
	var req struct {
		Temperature *float64        `json:"temperature"`
		Seed        json.RawMessage `json:"seed"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	return (req.Temperature != nil && *req.Temperature == 0) || (len(req.Seed) > 0 && string(req.Seed) != "null")
}

// Bounds of an answer's outputs.
const (
	// MaxChoices is the most choices an answer's outputs hold.
	MaxChoices = 128
	// MaxOutput bounds the text of all choices together.
	MaxOutput = 32 << 20
)

// Outputs are what an answer says, as a receipt hashes it: each choice's
// text and finish reason, and the tokens counted (the response hash), and
// its log-probabilities, exact (the logprobs hash: honest replicas on
// different hardware differ there, so it is kept apart from the response
// hash). An answer's id and times are not outputs.
type Outputs struct {
	choices          []choice
	size             int
	ntokens          int
	PromptTokens     uint64
	CompletionTokens uint64
	// Usage reports whether the answer counted its tokens.
	Usage bool
}

type choice struct {
	index  uint64
	text   []byte
	finish string
	tokens []logprob.Token
}

// rawToken is one token's log-probabilities as an answer writes them:
// numbers kept as their decimal text, read exactly (logprob.ParseDecimal).
type rawToken struct {
	Token   string      `json:"token"`
	Logprob json.Number `json:"logprob"`
	Top     []struct {
		Token   string      `json:"token"`
		Logprob json.Number `json:"logprob"`
	} `json:"top_logprobs"`
}

// Bounds of the log-probabilities an answer's outputs keep.
const (
	// MaxTokens is the most tokens' log-probabilities kept per answer;
	// MaxTop the most alternatives kept per token.
	MaxTokens = logprob.MaxTokens
	MaxTop    = logprob.MaxTop
)

// ErrTooLarge is returned (wrapped) when an answer's outputs exceed
// MaxChoices or MaxOutput.
var ErrTooLarge = errors.New("answer over the bounds of a receipt")

// answer is the part of a completion, or of a chunk of one, that Outputs
// reads.
type answer struct {
	Choices []struct {
		Index   uint64 `json:"index"`
		Message *struct {
			Content *string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Content []rawToken `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     uint64 `json:"prompt_tokens"`
		CompletionTokens uint64 `json:"completion_tokens"`
	} `json:"usage"`
}

// Add reads one JSON completion (a whole answer), or one chunk of a
// streamed one: text is appended to its choice's.
func (o *Outputs) Add(data []byte) error {
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("receipt: an answer that is not a JSON completion: %w", err)
	}
	for _, c := range a.Choices {
		i := slices.IndexFunc(o.choices, func(x choice) bool { return x.index == c.Index })
		if i < 0 {
			if len(o.choices) >= MaxChoices {
				return fmt.Errorf("receipt: more than %d choices: %w", MaxChoices, ErrTooLarge)
			}
			o.choices = append(o.choices, choice{index: c.Index})
			i = len(o.choices) - 1
		}
		var text *string
		switch {
		case c.Message != nil:
			text = c.Message.Content
		case c.Delta != nil:
			text = c.Delta.Content
		}
		if text != nil {
			if o.size += len(*text); o.size > MaxOutput {
				return fmt.Errorf("receipt: more than %d bytes of text: %w", MaxOutput, ErrTooLarge)
			}
			o.choices[i].text = append(o.choices[i].text, *text...)
		}
		if c.FinishReason != nil {
			o.choices[i].finish = *c.FinishReason
		}
		if c.Logprobs != nil {
			for _, tl := range c.Logprobs.Content {
				if o.ntokens++; o.ntokens > MaxTokens {
					return fmt.Errorf("receipt: more than %d tokens' log-probabilities: %w", MaxTokens, ErrTooLarge)
				}
				lp, err := logprob.ParseDecimal(tl.Logprob.String())
				if err != nil {
					return fmt.Errorf("receipt: choice %d, token %d: %w", c.Index, len(o.choices[i].tokens), err)
				}
				t := logprob.Token{Token: tl.Token, Logprob: lp}
				for _, alt := range tl.Top[:min(len(tl.Top), MaxTop)] {
					lp, err := logprob.ParseDecimal(alt.Logprob.String())
					if err != nil {
						return fmt.Errorf("receipt: choice %d, token %d, an alternative: %w", c.Index, len(o.choices[i].tokens), err)
					}
					t.Top = append(t.Top, logprob.Alt{Token: alt.Token, Logprob: lp})
				}
				o.choices[i].tokens = append(o.choices[i].tokens, t)
			}
		}
	}
	if a.Usage != nil {
		o.PromptTokens, o.CompletionTokens, o.Usage = a.Usage.PromptTokens, a.Usage.CompletionTokens, true
	}
	return nil
}

// Hash is the response hash of a receipt: SHA-256 over the choices in
// index order, each as its index (8 bytes), its text and its finish reason
// (each length-prefixed, 8 bytes) (logprob.Answer.TextHash). The same
// answer streamed or whole hashes alike.
func (o *Outputs) Hash() ledger.Hash { return o.Answer().TextHash() }

// LogprobsHash is a receipt's hash of the answer's log-probabilities
// (logprob.Answer.LogprobsHash): zero when it gave none.
func (o *Outputs) LogprobsHash() ledger.Hash { return o.Answer().LogprobsHash() }

// Answer is what the outputs say, in the form the ledger judges: choices
// in index order, log-probabilities exact.
func (o *Outputs) Answer() *logprob.Answer {
	a := &logprob.Answer{Choices: make([]logprob.Choice, 0, len(o.choices))}
	for _, c := range o.choices {
		a.Choices = append(a.Choices, logprob.Choice{Index: c.index, Text: string(c.text), Finish: c.finish, Tokens: c.tokens})
	}
	slices.SortStableFunc(a.Choices, func(x, y logprob.Choice) int { return cmpU64(x.Index, y.Index) })
	return a
}

// Text is choice index's text so far ("" if none).
func (o *Outputs) Text(index uint64) string {
	for _, c := range o.choices {
		if c.index == index {
			return string(c.text)
		}
	}
	return ""
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// New is the unsigned receipt of provider's replica of service for an
// answer with outputs o to request body, at unix milliseconds ms.
func New(service uint64, provider address.Address, body []byte, o *Outputs, ms int64) *ledger.ServiceReceipt {
	return &ledger.ServiceReceipt{
		ServiceID: service, Provider: provider,
		RequestHash: RequestHash(body), ResponseHash: o.Hash(), ParamsHash: ParamsHash(body), LogprobsHash: o.LogprobsHash(),
		PromptTokens: o.PromptTokens, CompletionTokens: o.CompletionTokens, Time: ms,
	}
}

// Check verifies r on chainID and that it is the receipt of provider's
// replica of service for request body with outputs o: what a node checks
// of each receipt before it relays or keeps it.
func Check(r *ledger.ServiceReceipt, chainID string, service uint64, provider address.Address, body []byte, o *Outputs) error {
	if err := r.Verify(chainID); err != nil {
		return err
	}
	switch {
	case r.ServiceID != service:
		return fmt.Errorf("receipt for service %d, the answer is service %d's", r.ServiceID, service)
	case r.Provider != provider:
		return fmt.Errorf("receipt signed by %s, the answer came from %s", r.Provider, provider)
	case r.RequestHash != RequestHash(body):
		return errors.New("receipt for another request than the one sent")
	case r.ResponseHash != o.Hash():
		return errors.New("receipt for another answer than the one received")
	case r.LogprobsHash != o.LogprobsHash():
		return errors.New("receipt for other log-probabilities than the answer's")
	}
	return nil
}

// Equivalent reports whether two answers can be the same model's on
// different hardware within tol (logprob.Scale per nat): the rule the
// ledger judges a service dispute by (logprob.Equivalent).
func Equivalent(a, b *Outputs, tol int64) bool {
	if a == nil || b == nil {
		return false
	}
	return logprob.Equivalent(a.Answer(), b.Answer(), tol)
}
