package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// Services are verified by sampled re-execution (docs/ledger.md, "Service
// disputes"): every replica signs a receipt of each request it answers
// (ServiceReceipt, with its provider's key); a node that sends a sample of
// real requests to a second replica of another operator, and on a
// disagreement to a third of a third operator, holds three signed receipts
// for one request hash, two of which agree. MsgServiceDispute brings them
// here: the ledger checks the signatures against the providers' addresses
// (an address is its key's hash), that each signer runs or ran a replica of
// the service, that the requests are the same, and slashes the minority as
// an outvoted job replica is. It trusts no one's word: not the node's that
// sends the dispute, which signs nothing in the evidence. Services whose
// owner declares their answers bit-exact (ServiceOpenAI.Exact) are judged
// by the receipts' response hashes; services that declare a tolerance on
// log-probabilities (ServiceOpenAI.LogprobTolE9) by the three answers
// themselves (MsgServiceDispute.Answers), each bound to its replica's
// receipt by its hashes, under one rule (internal/ledger/logprob) that the
// nodes' gateways apply too. A service that declares neither cannot be
// disputed: an honest replica can be the odd one.

// MsgTypeServiceDispute is the message type of MsgServiceDispute.
const MsgTypeServiceDispute MsgType = 82

// Bounds of a receipt and a dispute.
const (
	// DisputeReceipts is how many receipts a dispute carries: two that
	// agree and one that does not.
	DisputeReceipts = 3
	// MaxReceiptAge is how old (by its own time, against the block's) a
	// receipt a dispute carries may be, in seconds; MaxReceiptSkew how far
	// ahead of the block's time.
	MaxReceiptAge  = 86_400
	MaxReceiptSkew = 600
	// ReceiptVersion is the version byte of a receipt's signed bytes
	// (2: with LogprobsHash).
	ReceiptVersion = 2
)

// receiptDomain separates receipt signatures from txs and handshakes
// signed with the same provider key.
const receiptDomain = "gpunet/receipt/v1\x00"

// ServiceReceipt is a replica's signed statement of one answer: its
// provider answered the request whose body hashes to RequestHash, for
// service ServiceID, with an answer whose outputs hash to ResponseHash
// (internal/receipt says how both hashes are taken), counting
// PromptTokens and CompletionTokens, at Time (unix milliseconds, the
// provider's clock). ParamsHash is the hash of the request's sampling
// parameters (model, seed, temperature, …), so that a reader sees at a
// glance that two receipts were for the same decoding. LogprobsHash is
// the hash of the answer's log-probabilities (logprob.Answer.LogprobsHash;
// zero when it gave none), so that a dispute's evidence of them is the
// replica's own word (a service that declares a tolerance). PubKey is the
// provider's ed25519 key, whose address must be Provider; Sig its
// signature over SignBytes(chain ID).
type ServiceReceipt struct {
	ServiceID        uint64          `json:"service_id"`
	Provider         address.Address `json:"provider"`
	RequestHash      Hash            `json:"request_hash"`
	ResponseHash     Hash            `json:"response_hash"`
	ParamsHash       Hash            `json:"params_hash"`
	LogprobsHash     Hash            `json:"logprobs_hash"`
	PromptTokens     uint64          `json:"prompt_tokens"`
	CompletionTokens uint64          `json:"completion_tokens"`
	Time             int64           `json:"time"`
	PubKey           []byte          `json:"pub_key"`
	Sig              []byte          `json:"sig"`
}

// SignBytes is what the provider signs: the domain, the version, the chain
// ID and every field but the signature, in a fixed binary layout.
func (r *ServiceReceipt) SignBytes(chainID string) []byte {
	b := make([]byte, 0, len(receiptDomain)+1+1+len(chainID)+8+20+4*32+3*8+32)
	b = append(b, receiptDomain...)
	b = append(b, ReceiptVersion, byte(len(chainID)))
	b = append(b, chainID...)
	b = binary.BigEndian.AppendUint64(b, r.ServiceID)
	b = append(b, r.Provider[:]...)
	b = append(b, r.RequestHash[:]...)
	b = append(b, r.ResponseHash[:]...)
	b = append(b, r.ParamsHash[:]...)
	b = append(b, r.LogprobsHash[:]...)
	b = binary.BigEndian.AppendUint64(b, r.PromptTokens)
	b = binary.BigEndian.AppendUint64(b, r.CompletionTokens)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time))
	return append(b, r.PubKey...)
}

// ID identifies a receipt: the SHA-256 of its signed bytes and signature
// (ed25519 signatures are deterministic, and the ledger checks them
// strictly, so one statement has one ID). A receipt is used in at most one
// dispute.
func (r *ServiceReceipt) ID(chainID string) Hash {
	h := sha256.New()
	h.Write(r.SignBytes(chainID))
	h.Write(r.Sig)
	return Hash(h.Sum(nil))
}

// Sign fills in PubKey and Sig with key, whose address must be Provider.
func (r *ServiceReceipt) Sign(chainID string, key ed25519.PrivateKey) {
	r.PubKey = slices.Clone(key.Public().(ed25519.PublicKey))
	r.Sig = ed25519.Sign(key, r.SignBytes(chainID))
}

// Verify checks the receipt's form and its signature on chainID: the key
// is Provider's and signed these fields. It says nothing about whether
// the provider runs a replica of the service (the ledger, or a client,
// checks that against the chain).
func (r *ServiceReceipt) Verify(chainID string) error {
	if r.ServiceID == 0 {
		return invalid("receipt: service_id is 0")
	}
	if r.Provider.IsZero() {
		return invalid("receipt: provider is empty")
	}
	if len(r.PubKey) != ed25519.PublicKeySize {
		return invalid("receipt: pub_key has %d bytes, want %d", len(r.PubKey), ed25519.PublicKeySize)
	}
	if len(r.Sig) != ed25519.SignatureSize {
		return invalid("receipt: sig has %d bytes, want %d", len(r.Sig), ed25519.SignatureSize)
	}
	if r.Time <= 0 {
		return invalid("receipt: time %d is not a unix time in milliseconds", r.Time)
	}
	if address.FromPubKey(r.PubKey) != r.Provider {
		return invalid("receipt: pub_key is not provider %s's key (it is %s's)", r.Provider, address.FromPubKey(r.PubKey))
	}
	if !ed25519.Verify(r.PubKey, r.SignBytes(chainID), r.Sig) {
		return fmt.Errorf("receipt of provider %s for service %d: the signature does not verify on chain %q: %w", r.Provider, r.ServiceID, chainID, ErrBadSignature)
	}
	return nil
}

// MsgServiceDispute carries the receipts of three replicas of one service,
// of three providers, for the same request: two answered alike and one did
// not. Anyone may send it (a node that checked the request, usually); the
// provider whose answer is the odd one is slashed.
//
// Answers, for a service that declares a tolerance on log-probabilities,
// are the three answers in logprob's evidence form, in the receipts'
// order, each at most logprob.MaxEvidence bytes and hashing to its
// receipt's ResponseHash and LogprobsHash: the ledger judges them itself
// (logprob.Judge). Empty for a service whose answers are bit-exact.
type MsgServiceDispute struct {
	Receipts []ServiceReceipt  `json:"receipts"`
	Answers  []json.RawMessage `json:"answers,omitempty"`
}

// Type implements Msg.
func (*MsgServiceDispute) Type() MsgType { return MsgTypeServiceDispute }

// ValidateBasic implements Msg: the receipts' form, one service and one
// request, three providers, two answers of which one is given twice. The
// signatures need the chain ID and are checked when the message runs.
//
// With answers, it checks their count and size instead of the receipts'
// majority; they are read and hashed when the message runs, after the
// signatures (reading them is the dearer check), and who is the odd one
// takes the service's tolerance.
func (m *MsgServiceDispute) ValidateBasic() error {
	if len(m.Answers) > 0 {
		return m.answersForm()
	}
	_, _, err := m.split()
	return err
}

// answersForm checks the receipts' shape and the answers' count and size.
func (m *MsgServiceDispute) answersForm() error {
	if err := m.shape(); err != nil {
		return err
	}
	if len(m.Answers) != DisputeReceipts {
		return invalid("answers: want %d (one per receipt, in their order), got %d", DisputeReceipts, len(m.Answers))
	}
	for i, raw := range m.Answers {
		if len(raw) > logprob.MaxEvidence {
			return invalid("answers[%d]: %d bytes, at most %d", i, len(raw), logprob.MaxEvidence)
		}
	}
	return nil
}

// evidence checks the receipts' shape and the answers, and returns the
// answers read.
func (m *MsgServiceDispute) evidence() (out [DisputeReceipts]*logprob.Answer, err error) {
	if err := m.answersForm(); err != nil {
		return out, err
	}
	same := true
	for i, raw := range m.Answers {
		a, err := logprob.DecodeEvidence(raw)
		if err != nil {
			return out, invalid("answers[%d]: %v", i, err)
		}
		r := &m.Receipts[i]
		if Hash(a.TextHash()) != r.ResponseHash {
			return out, invalid("answers[%d]: its text hashes to %x, but provider %s's receipt says %x", i, a.TextHash(), r.Provider, r.ResponseHash)
		}
		if Hash(a.LogprobsHash()) != r.LogprobsHash {
			return out, invalid("answers[%d]: its log-probabilities hash to %x, but provider %s's receipt says %x", i, a.LogprobsHash(), r.Provider, r.LogprobsHash)
		}
		same = same && r.ResponseHash == m.Receipts[0].ResponseHash && r.LogprobsHash == m.Receipts[0].LogprobsHash
		out[i] = a
	}
	if same {
		return out, invalid("answers: the three are the same: nothing to dispute")
	}
	return out, nil
}

// split checks the receipts' shape and returns the index of the odd one
// and of the two that agree.
func (m *MsgServiceDispute) split() (odd int, agree [2]int, err error) {
	if err := m.shape(); err != nil {
		return 0, agree, err
	}
	r := m.Receipts
	switch a, b, c := r[0].ResponseHash, r[1].ResponseHash, r[2].ResponseHash; {
	case a == b && b == c:
		return 0, agree, invalid("receipts: the three answers agree: nothing to dispute")
	case a == b:
		return 2, [2]int{0, 1}, nil
	case a == c:
		return 1, [2]int{0, 2}, nil
	case b == c:
		return 0, [2]int{1, 2}, nil
	}
	return 0, agree, invalid("receipts: the three answers all differ: no majority to judge by")
}

// shape checks the receipts' form: three, of one service and one request,
// of three providers.
func (m *MsgServiceDispute) shape() error {
	if len(m.Receipts) != DisputeReceipts {
		return invalid("receipts: want %d (two that agree, one that does not), got %d", DisputeReceipts, len(m.Receipts))
	}
	r := m.Receipts
	for i := range r {
		switch {
		case r[i].ServiceID == 0:
			return invalid("receipts[%d]: service_id is 0", i)
		case r[i].Provider.IsZero():
			return invalid("receipts[%d]: provider is empty", i)
		case len(r[i].PubKey) != ed25519.PublicKeySize:
			return invalid("receipts[%d]: pub_key has %d bytes, want %d", i, len(r[i].PubKey), ed25519.PublicKeySize)
		case len(r[i].Sig) != ed25519.SignatureSize:
			return invalid("receipts[%d]: sig has %d bytes, want %d", i, len(r[i].Sig), ed25519.SignatureSize)
		case r[i].ServiceID != r[0].ServiceID:
			return invalid("receipts[%d]: service %d, but receipts[0] is for service %d", i, r[i].ServiceID, r[0].ServiceID)
		case r[i].RequestHash != r[0].RequestHash:
			return invalid("receipts[%d]: request_hash %x differs from receipts[0]'s %x: a dispute compares answers to one request", i, r[i].RequestHash[:8], r[0].RequestHash[:8])
		}
		for j := range i {
			if r[j].Provider == r[i].Provider {
				return invalid("receipts[%d] and [%d] are both provider %s's: a dispute needs three providers", j, i, r[i].Provider)
			}
		}
	}
	return nil
}

// disputedKey marks a receipt used in a dispute: svcdisp/<receipt ID>.
func disputedKey(id Hash) []byte { return append(slices.Clone(prefixServiceDisputed), id[:]...) }

// servedService reports whether provider runs a replica of s now, or ran
// one that ended at or after since (unix seconds): a receipt's signer must
// have been one of its replicas.
func servedService(s *Service, provider address.Address, since int64) bool {
	if s.replica(provider) >= 0 {
		return true
	}
	for _, e := range s.Ended {
		if e.Provider == provider && e.EndedAt >= since {
			return true
		}
	}
	return false
}

func execServiceDispute(o *Overlay, chainID string, m *MsgServiceDispute, p Params, info BlockInfo) ([]Event, error) {
	var (
		odd     int
		agree   [2]int
		answers [DisputeReceipts]*logprob.Answer
		err     error
	)
	tolerant := len(m.Answers) > 0
	if tolerant {
		err = m.answersForm()
	} else {
		odd, agree, err = m.split()
	}
	if err != nil {
		return nil, err
	}
	now := info.Time.Unix()
	ids := make([]Hash, len(m.Receipts))
	for i := range m.Receipts {
		r := &m.Receipts[i]
		if err := r.Verify(chainID); err != nil {
			return nil, fmt.Errorf("receipts[%d]: %w", i, err)
		}
		// The mempool's check runs without a block time (zero): the
		// window is checked in the block.
		secs := r.Time / 1000
		if !info.Time.IsZero() && (secs < now-MaxReceiptAge || secs > now+MaxReceiptSkew) {
			return nil, invalid("receipts[%d]: time %d (unix ms) is not within %d s before or %d s after the block's time %d", i, r.Time, MaxReceiptAge, MaxReceiptSkew, now)
		}
		ids[i] = r.ID(chainID)
		if o.Get(disputedKey(ids[i])) != nil {
			return nil, invalid("receipts[%d] (provider %s) was used in a dispute already", i, r.Provider)
		}
	}
	if tolerant {
		// The answers are read after the signatures: forged receipts cost
		// the chain no parsing.
		if answers, err = m.evidence(); err != nil {
			return nil, err
		}
	}
	s, err := mustService(o, m.Receipts[0].ServiceID)
	if err != nil {
		return nil, err
	}
	// An outvoted answer is evidence of a fault only where honest replicas
	// answer bit for bit alike: the owner says so (openai.exact). A float
	// model's honest replica can be the odd one at a near tie, and the
	// ledger has no tolerance to judge that by.
	switch oa := s.Spec.OpenAI; {
	case tolerant && (oa == nil || oa.LogprobTolE9 == 0):
		return nil, fmt.Errorf("service %d declares no tolerance on log-probabilities (openai.tolerance): its answers cannot be judged by them: %w", s.ID, ErrServiceState)
	case tolerant:
		// The owner's tolerance, never under the chain's least: honest
		// hardware's rounding is never slashable.
		tol := max(oa.LogprobTolE9, p.ServiceLogprobTolMinE9)
		var ok bool
		if odd, ok = logprob.Judge(answers, int64(tol)); !ok {
			return nil, invalid("answers: at a tolerance of %d/10^9 nat they show no minority (two alike, the third like neither): nothing to slash", tol)
		}
		agree = [2]int{(odd + 1) % DisputeReceipts, (odd + 2) % DisputeReceipts}
	case oa == nil || !oa.Exact:
		return nil, fmt.Errorf("service %d does not declare its answers bit-exact (openai.exact): replicas that answer differently may both be honest, so none is slashed for it: %w", s.ID, ErrServiceState)
	}
	for i := range m.Receipts {
		r := &m.Receipts[i]
		// A replica that ended before its receipt was signed cannot have
		// signed it as a replica.
		if !servedService(s, r.Provider, r.Time/1000) {
			return nil, fmt.Errorf("receipts[%d]: %s runs no replica of service %d and ran none since its receipt: %w", i, r.Provider, s.ID, ErrNotServiceParty)
		}
	}
	for _, id := range ids {
		o.Set(disputedKey(id), []byte{1})
	}
	cheat := m.Receipts[odd].Provider
	amt, err := slashFor(o, cheat, s.Owner, p, info, SlashEvent{Code: SlashServiceOutvoted, Service: s.ID, Count: 2, Of: 3})
	if err != nil {
		return nil, err
	}
	// Its reputation falls as an outvoted job replica's does, in the
	// class its replica was placed in (the record counts it there).
	if i := s.replica(cheat); i >= 0 {
		err = recordInvalid(o, cheat, s.Replicas[i].Class)
	} else {
		err = recordInvalidUnclassed(o, cheat)
	}
	if err != nil {
		return nil, err
	}
	events := []Event{serviceEvent("service_dispute", s,
		Attr{"provider", cheat.String()}, Attr{"slashed", strconv.FormatUint(amt, 10)},
		Attr{"request", fmt.Sprintf("%x", m.Receipts[odd].RequestHash[:])},
		Attr{"majority", m.Receipts[agree[0]].Provider.String() + "," + m.Receipts[agree[1]].Provider.String()})}
	if i := s.replica(cheat); i >= 0 && !s.Done() {
		// Released and replaced, as an evicted replica is: paid to its
		// last heartbeat only (the disputed period is not paid), never
		// placed on this service again.
		old := s.Deadline
		ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndDisputed}, true, false)
		if err != nil {
			return nil, err
		}
		s.Ended[len(s.Ended)-1].Slashed = amt
		events = append(events, ev)
		events = append(events, refreshService(o, s, p, now, old)...)
	} else {
		setService(o, s, s.Deadline)
	}
	return events, nil
}

// recordInvalidUnclassed counts an outvoted answer of a replica that has
// ended (its class is not recorded): in the provider's totals and its
// reputation only.
func recordInvalidUnclassed(o *Overlay, addr address.Address) error {
	pr, ok, err := GetProvider(o, addr)
	if err != nil || !ok {
		return err
	}
	pr.Invalid++
	pr.Reputation -= pr.Reputation / reputationInvalidDiv
	setProvider(o, pr)
	return nil
}
