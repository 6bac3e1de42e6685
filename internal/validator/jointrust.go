package validator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	dbm "github.com/cometbft/cometbft-db"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/light"
	"github.com/cometbft/cometbft/light/provider"
	lighthttp "github.com/cometbft/cometbft/light/provider/http"
	lightdb "github.com/cometbft/cometbft/light/store/db"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/ledger"
)

// What `gpunet init --join` checks before it writes state sync's
// trust_height and trust_hash: that the header is one of the chain the
// genesis starts, as CometBFT's light client verifies it, and that every
// RPC server the node will ask serves that same header. The join node
// chooses the header and names the RPC servers, so a join node that
// serves the real genesis could otherwise send a new node to another
// chain with the same chain id.
//
// The root of trust is the genesis (its first block must be signed by the
// genesis's validators and start from its app state) or a header the user
// pins (--trust-height, --trust-hash). From there the light client
// verifies the join node's header (skipping verification, one third of a
// trusted validator set's power), with one RPC server as its primary and
// the others as witnesses; then every server's header at that height is
// compared with the verified one. Whoever disagrees is named: a server
// whose header does not verify from the root is on another chain; two
// headers that both verify are a fork signed by the validators.

// rpcSource is a CometBFT RPC server a joining node asks for headers.
type rpcSource struct {
	// addr is the address as rpc_servers takes it (host:port or a URL).
	addr string
	// from says who named it, for messages ("rpc_address of URL").
	from string
	// join is true for the join node's own RPC.
	join bool
}

func (s rpcSource) String() string { return s.addr + " (" + s.from + ")" }

// trustPin is a header the user trusts (--trust-height, --trust-hash).
type trustPin struct {
	height int64
	hash   []byte
}

// newProviderFunc makes the light client's provider for an RPC server.
type newProviderFunc func(chainID, addr string) (provider.Provider, error)

// httpProvider is CometBFT's RPC provider for addr.
func httpProvider(chainID, addr string) (provider.Provider, error) {
	u, err := rpcURL(addr)
	if err != nil {
		return nil, err
	}
	return lighthttp.New(chainID, u)
}

// trustCheck is what verifyJoinTrust checks.
type trustCheck struct {
	// joinURL is the join node's API, for messages.
	joinURL string
	doc     *cmttypes.GenesisDoc
	// sources are the RPC servers to ask, the join node's first; the
	// servers written keep this order (CometBFT's primary is the first).
	sources []rpcSource
	// pin, when set, is the root of trust instead of the genesis.
	pin *trustPin
	// height and hash are the header the join node offers.
	height int64
	hash   []byte
	// newProvider defaults to httpProvider.
	newProvider newProviderFunc
}

// trusted is a header verifyJoinTrust verified, and the RPC servers that
// serve it.
type trusted struct {
	height  int64
	hash    []byte
	servers []string
	// root says what it was verified from.
	root  string
	notes []string
}

// errNoWitness refuses a join that only the join node could vouch for.
func errNoWitness(joinURL string) error {
	return fmt.Errorf("refusing to join: %s names no other node's CometBFT RPC to check its header against, and the light client will not trust the join node alone: "+
		"give --witness http://HOST:26657 (the CometBFT RPC of another node of the network; repeat for more), "+
		"or pin a header learnt from someone you trust with --trust-height and --trust-hash; nothing written", joinURL)
}

// verifyJoinTrust verifies the header tc offers, from the genesis or the
// pinned header, with CometBFT's light client over tc's sources. Its
// errors name the source that lied.
func verifyJoinTrust(ctx context.Context, tc *trustCheck) (*trusted, error) {
	chainID := tc.doc.ChainID
	newProvider := tc.newProvider
	if newProvider == nil {
		newProvider = httpProvider
	}
	var srcs []*source
	others := 0
	for _, rs := range tc.sources {
		p, err := newProvider(chainID, rs.addr)
		if err != nil {
			return nil, fmt.Errorf("CometBFT RPC %s: %w", rs, err)
		}
		srcs = append(srcs, &source{rpcSource: rs, p: p, said: make(map[int64]answer)})
		if !rs.join {
			others++
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%s names no CometBFT RPC server (rpc_address), which state sync's light client needs", tc.joinURL)
	}
	// The root first: a server on another chain is named even when it is
	// the only one.
	rt, err := findRoot(ctx, tc, srcs)
	if err != nil {
		return nil, err
	}
	if tc.pin == nil && others == 0 {
		return nil, errNoWitness(tc.joinURL)
	}
	// The primary: a server that has the root block, the join node's
	// own when it does; the others are witnesses. CometBFT wants one
	// witness at least: with a pinned header and the join node alone,
	// the join node is its own.
	primary := rt.by
	if i := slices.IndexFunc(srcs, func(s *source) bool { return s.join }); i >= 0 && srcs[i].answer(rt.block.Height).lb != nil {
		primary = srcs[i]
	}
	var witnesses []provider.Provider
	for _, s := range srcs {
		if s != primary {
			witnesses = append(witnesses, s)
		}
	}
	if len(witnesses) == 0 {
		witnesses = append(witnesses, primary)
	}
	lb, lcErr := verifyFrom(ctx, chainID, rt, primary, witnesses, tc.height)

	// Every server's header at the height, compared with the verified
	// one; any disagreement (or the light client's refusal) is examined
	// server by server.
	ask(ctx, srcs, tc.height)
	var agree []*source
	var silent []string
	disagree := lcErr != nil
	for _, s := range srcs {
		a := s.answer(tc.height)
		switch {
		case a.lb == nil:
			silent = append(silent, fmt.Sprintf("%s: %v", s, a.err))
		case lcErr == nil && bytes.Equal(a.lb.Hash(), lb.Hash()):
			agree = append(agree, s)
		default:
			disagree = true
		}
	}
	if disagree {
		return nil, attribute(ctx, tc, rt, srcs, lcErr)
	}
	if !bytes.Equal(lb.Hash(), tc.hash) {
		return nil, fmt.Errorf("refusing to join: %s says the block at height %d is %X (trust_hash), but the block there, verified from %s by CometBFT's light client and served by %s, is %X: the join node lied about the header to trust, or is on another chain; nothing written",
			tc.joinURL, tc.height, tc.hash, rt.what, names(agree), lb.Hash())
	}
	res := &trusted{height: tc.height, hash: lb.Hash(), root: rt.what}
	nonJoin := 0
	for _, s := range agree { // in tc.sources' order: the join node's first
		res.servers = append(res.servers, s.addr)
		if !s.join {
			nonJoin++
		}
	}
	for _, s := range silent {
		res.notes = append(res.notes, "left out of rpc_servers, it did not answer for the header: "+s)
	}
	if tc.pin == nil && nonJoin == 0 {
		if hint := reachHint(tc.joinURL, unreached(srcs, tc.height), tc.height); hint != "" {
			return nil, fmt.Errorf("refusing to join: no CometBFT RPC server other than the join node's confirmed the header at height %d: %s; "+
				"or pin a header with --trust-height and --trust-hash; nothing written", tc.height, hint)
		}
		return nil, fmt.Errorf("refusing to join: no CometBFT RPC server other than the join node's confirmed the header at height %d (%s); "+
			"a joining node must reach the CometBFT RPC (port 26657 by default) of two nodes: give --witness http://HOST:26657 of another node, "+
			"or pin a header with --trust-height and --trust-hash; nothing written", tc.height, strings.Join(silent, "; "))
	}
	if len(res.servers) == 1 {
		res.servers = append(res.servers, res.servers[0])
		res.notes = append(res.notes, fmt.Sprintf("state sync's light client will ask %s alone, checked against the header you pinned (CometBFT wants two RPC servers; it is named twice)", res.servers[0]))
	}
	return res, nil
}

// root is where verification starts: a light block checked against the
// genesis or the pinned header.
type root struct {
	block  *cmttypes.LightBlock
	by     *source
	period time.Duration
	what   string
}

// findRoot asks every source for the root block and checks what each
// sent: the genesis's first block must be signed by the genesis's
// validators and carry its app and consensus hashes; a pinned block must
// have the pinned hash. Sources without the block (state-synced or pruned
// nodes) are checked later, at the offered height.
func findRoot(ctx context.Context, tc *trustCheck, srcs []*source) (*root, error) {
	chainID := tc.doc.ChainID
	var (
		h     int64
		check func(lb *cmttypes.LightBlock) error
		rt    = &root{period: DefaultTrustPeriod}
	)
	if tc.pin != nil {
		h = tc.pin.height
		rt.what = fmt.Sprintf("the header you pinned at height %d", h)
		check = func(lb *cmttypes.LightBlock) error {
			if !bytes.Equal(lb.Hash(), tc.pin.hash) {
				return fmt.Errorf("its block at height %d is %X, not the pinned %X: it is on another chain, or --trust-hash is wrong", h, lb.Hash(), tc.pin.hash)
			}
			if err := lb.ValidateBasic(chainID); err != nil {
				return fmt.Errorf("its block at height %d is not one of chain %q: %w", h, chainID, err)
			}
			if err := lb.ValidatorSet.VerifyCommitLight(chainID, lb.Commit.BlockID, lb.Height, lb.Commit); err != nil {
				return fmt.Errorf("its block at height %d is not signed by its validators: %w", h, err)
			}
			return nil
		}
	} else {
		gb, err := genesisBlockOf(tc.doc)
		if err != nil {
			return nil, err
		}
		h = gb.height
		rt.what = "the genesis"
		check = func(lb *cmttypes.LightBlock) error { return gb.check(chainID, lb) }
	}
	ask(ctx, srcs, h)
	var bad, silent []string
	for _, s := range srcs {
		a := s.answer(h)
		if a.lb == nil {
			silent = append(silent, fmt.Sprintf("%s: %v", s, a.err))
			continue
		}
		if err := check(a.lb); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", s, err))
			continue
		}
		if rt.block == nil {
			rt.block, rt.by = a.lb, s
		} else if !bytes.Equal(rt.block.Hash(), a.lb.Hash()) {
			return nil, fmt.Errorf("refusing to join: %s and %s serve two blocks at height %d (%X, %X), both signed by the validators: the network has forked; nothing written",
				rt.by, s, h, rt.block.Hash(), a.lb.Hash())
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("refusing to join: CometBFT RPC not on the chain of %s (chain id %q): %s; nothing written", rt.what, chainID, strings.Join(bad, "; "))
	}
	if rt.block == nil {
		if cut := unreached(srcs, h); len(cut) == len(srcs) {
			return nil, fmt.Errorf("refusing to join: %s; nothing written", reachHint(tc.joinURL, cut, h))
		} else if len(cut) > 0 {
			silent = append(silent, reachHint(tc.joinURL, cut, h))
		}
		if tc.pin != nil {
			return nil, fmt.Errorf("no CometBFT RPC server serves the pinned block at height %d (%s): pin a height they still have; nothing written", h, strings.Join(silent, "; "))
		}
		return nil, fmt.Errorf("no CometBFT RPC server serves block %d, to verify the chain from the genesis (a node that joined by state sync, or prunes, keeps no early blocks: %s): "+
			"give --witness http://HOST:26657 of a node that has the chain from its start, or pin a recent header with --trust-height and --trust-hash; nothing written", h, strings.Join(silent, "; "))
	}
	if tc.pin != nil {
		if light.HeaderExpired(rt.block.SignedHeader, rt.period, time.Now()) {
			return nil, fmt.Errorf("the pinned header at height %d is from %s, older than the trust period (%s): pin a more recent one; nothing written",
				h, rt.block.Time.UTC().Format(time.RFC3339), rt.period)
		}
	} else {
		// The genesis does not expire: the period covers the chain's
		// age. (A node's own state sync uses a recent header, and the
		// default period.)
		rt.period = time.Since(rt.block.Time) + DefaultTrustPeriod
	}
	return rt, nil
}

// verifyFrom verifies the header at height with a light client that
// trusts rt's block, asking primary and cross-checking with witnesses.
func verifyFrom(ctx context.Context, chainID string, rt *root, primary provider.Provider, witnesses []provider.Provider, height int64) (*cmttypes.LightBlock, error) {
	st := lightdb.New(dbm.NewMemDB(), "")
	if err := st.SaveLightBlock(rt.block); err != nil {
		return nil, err
	}
	c, err := light.NewClientFromTrustedStore(chainID, rt.period, primary, witnesses, st, light.SkippingVerification(light.DefaultTrustLevel))
	if err != nil {
		return nil, err
	}
	return c.VerifyLightBlockAtHeight(ctx, height, time.Now())
}

// attribute says who lied when the sources disagree on the header at
// tc.height or the light client refused it (lcErr): each source's header
// is verified alone from the root. One that does not verify is on another
// chain; two that verify and differ are a fork.
func attribute(ctx context.Context, tc *trustCheck, rt *root, srcs []*source, lcErr error) error {
	chainID := tc.doc.ChainID
	var lied, answers []string
	verified := map[string][]*source{}
	var order []string
	for _, s := range srcs {
		a := s.answer(tc.height)
		if a.lb == nil {
			answers = append(answers, fmt.Sprintf("%s: no answer (%v)", s, a.err))
			continue
		}
		answers = append(answers, fmt.Sprintf("%s: %X", s, a.lb.Hash()))
		if _, err := verifyFrom(ctx, chainID, rt, s, []provider.Provider{s}, tc.height); err != nil {
			// The direct check's reason reads better than what the light
			// client says after its bisection ran out of blocks.
			if e := light.Verify(rt.block.SignedHeader, rt.block.ValidatorSet, a.lb.SignedHeader, a.lb.ValidatorSet,
				rt.period, time.Now(), 10*time.Second, light.DefaultTrustLevel); e != nil {
				err = e
			}
			lied = append(lied, fmt.Sprintf("%s: its block %X at height %d does not verify from %s (%v)", s, a.lb.Hash(), tc.height, rt.what, err))
			continue
		}
		k := string(a.lb.Hash())
		if verified[k] == nil {
			order = append(order, k)
		}
		verified[k] = append(verified[k], s)
	}
	var ok []string
	for _, k := range order {
		ok = append(ok, fmt.Sprintf("%X from %s", []byte(k), names(verified[k])))
	}
	switch {
	case len(order) > 1:
		return fmt.Errorf("refusing to join: two headers at height %d both verify from %s: %s: the validators signed two chains (a fork), ask the network's operators; nothing written",
			tc.height, rt.what, strings.Join(ok, "; "))
	case len(lied) > 0:
		msg := fmt.Sprintf("refusing to join: CometBFT RPC not on the chain of %s (chain id %q): %s", rt.what, chainID, strings.Join(lied, "; "))
		if len(ok) > 0 {
			msg += fmt.Sprintf(" (the header that verifies: %s)", ok[0])
		}
		return errors.New(msg + "; nothing written")
	case len(order) == 1:
		// One header, which verifies, but the light client found no
		// witness to confirm it.
		why := lcErr
		if errors.Is(lcErr, light.ErrFailedHeaderCrossReferencing) || errors.Is(lcErr, light.ErrNoWitnesses) {
			why = errors.New("no witness served it")
		}
		if hint := reachHint(tc.joinURL, unreached(srcs, tc.height), tc.height); hint != "" {
			return fmt.Errorf("refusing to join: the header at height %d verifies from %s, but no other CometBFT RPC server confirmed it (%v): %s; "+
				"or pin a header with --trust-height and --trust-hash; nothing written", tc.height, rt.what, why, hint)
		}
		return fmt.Errorf("refusing to join: the header at height %d verifies from %s, but no other CometBFT RPC server confirmed it (%v; answers: %s): "+
			"a joining node must reach the CometBFT RPC (port 26657 by default) of two nodes: give --witness http://HOST:26657 of another node, "+
			"or pin a header with --trust-height and --trust-hash; nothing written", tc.height, rt.what, why, strings.Join(answers, "; "))
	}
	return fmt.Errorf("refusing to join: CometBFT's light client could not verify the header at height %d from %s: %v (answers: %s); nothing written",
		tc.height, rt.what, lcErr, strings.Join(answers, "; "))
}

// names lists sources for a message.
func names(ss []*source) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.String())
	}
	return strings.Join(out, ", ")
}

// answer is what a source sent for one height.
type answer struct {
	lb  *cmttypes.LightBlock
	err error
}

// source is an RPC server as the light client sees it: a provider that
// remembers what it sent at each height, so that a refusal can say who
// sent what, and that is asked once per height.
type source struct {
	rpcSource
	p provider.Provider

	mu   sync.Mutex
	said map[int64]answer
}

var _ provider.Provider = (*source)(nil)

func (s *source) ChainID() string { return s.p.ChainID() }

func (s *source) ReportEvidence(ctx context.Context, ev cmttypes.Evidence) error {
	return s.p.ReportEvidence(ctx, ev)
}

// LightBlock implements provider.Provider: a block it sent before again,
// else asks.
func (s *source) LightBlock(ctx context.Context, height int64) (*cmttypes.LightBlock, error) {
	if a := s.answer(height); height > 0 && a.lb != nil {
		return a.lb, nil
	}
	lb, err := s.p.LightBlock(ctx, height)
	if ctx.Err() == nil {
		s.mu.Lock()
		if lb != nil {
			height = lb.Height
		}
		if height > 0 {
			s.said[height] = answer{lb, err}
		}
		s.mu.Unlock()
	}
	return lb, err
}

// answer is what s sent at height; an error if it was not asked.
func (s *source) answer(height int64) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.said[height]; ok {
		return a
	}
	return answer{err: errors.New("not asked")}
}

// ask asks every source for its block at height, at once.
func ask(ctx context.Context, srcs []*source, height int64) {
	var wg sync.WaitGroup
	for _, s := range srcs {
		wg.Go(func() { s.LightBlock(ctx, height) })
	}
	wg.Wait()
}

// genesisBlock is what the first block of the chain a genesis starts
// must say: signed by the genesis's validators, after the state its
// app_state makes, under its consensus parameters.
type genesisBlock struct {
	height                 int64
	vals                   *cmttypes.ValidatorSet
	appHash, consensusHash []byte
}

// genesisBlockOf computes doc's first block's validators, app hash and
// consensus hash as the node would: the validators are the ledger's
// genesis set when it has one (InitChain returns it), else genesis.json's.
func genesisBlockOf(doc *cmttypes.GenesisDoc) (*genesisBlock, error) {
	var g ledger.Genesis
	if err := json.Unmarshal(doc.AppState, &g); err != nil {
		return nil, fmt.Errorf("the genesis's app_state: %w", err)
	}
	var l ledger.Ledger
	_, appHash, err := l.InitGenesis(ledger.NewMemKV(), doc.ChainID, g)
	if err != nil {
		return nil, fmt.Errorf("the genesis's app_state: %w", err)
	}
	ups, err := ledger.GenesisValidatorSet(doc.ChainID, g)
	if err != nil {
		return nil, fmt.Errorf("the genesis's validators: %w", err)
	}
	var vals []*cmttypes.Validator
	for _, u := range ups {
		vals = append(vals, cmttypes.NewValidator(ed25519.PubKey(u.PubKey), int64(u.Power)))
	}
	if len(vals) == 0 {
		for _, v := range doc.Validators {
			vals = append(vals, cmttypes.NewValidator(v.PubKey, v.Power))
		}
	}
	seen := map[string]bool{}
	for _, v := range vals {
		if v.VotingPower <= 0 || seen[string(v.Address)] {
			return nil, fmt.Errorf("the genesis's validators: %X listed twice or with power %d", v.Address, v.VotingPower)
		}
		seen[string(v.Address)] = true
	}
	if len(vals) == 0 {
		return nil, errors.New("the genesis names no validators: a light client has nothing to verify its first block with")
	}
	return &genesisBlock{height: doc.InitialHeight, vals: cmttypes.NewValidatorSet(vals), appHash: appHash, consensusHash: doc.ConsensusParams.Hash()}, nil
}

// check says why lb is not the genesis's first block, if it is not.
func (g *genesisBlock) check(chainID string, lb *cmttypes.LightBlock) error {
	if err := lb.ValidateBasic(chainID); err != nil {
		return fmt.Errorf("its block %d is not one of chain %q: %w", g.height, chainID, err)
	}
	if lb.Height != g.height {
		return fmt.Errorf("it sent block %d for block %d", lb.Height, g.height)
	}
	if !bytes.Equal(lb.ValidatorsHash, g.vals.Hash()) {
		return fmt.Errorf("its block %d is signed by validators %X, but the genesis's validators hash to %X: it is another chain with the same chain id", g.height, lb.ValidatorsHash, g.vals.Hash())
	}
	if !bytes.Equal(lb.AppHash, g.appHash) {
		return fmt.Errorf("its block %d starts from app state %X, but the genesis's app_state hashes to %X: it is another chain with the same chain id and validators", g.height, lb.AppHash, g.appHash)
	}
	if !bytes.Equal(lb.ConsensusHash, g.consensusHash) {
		return fmt.Errorf("its block %d has consensus parameters %X, but the genesis's hash to %X: it is another chain", g.height, lb.ConsensusHash, g.consensusHash)
	}
	if err := g.vals.VerifyCommitLight(chainID, lb.Commit.BlockID, lb.Height, lb.Commit); err != nil {
		return fmt.Errorf("its block %d is not signed by the genesis's validators: %w", g.height, err)
	}
	return nil
}
