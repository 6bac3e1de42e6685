package validator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	cmtversion "github.com/cometbft/cometbft/api/cometbft/version/v1"
	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/crypto/tmhash"
	"github.com/cometbft/cometbft/light/provider"
	"github.com/cometbft/cometbft/light/provider/mock"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/cometbft/cometbft/version"

	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// chain is a chain's light blocks by height, as an RPC server serves
// them.
type chain map[int64]*cmttypes.LightBlock

// signer makes the blocks of one chain: its validators and their keys.
type signer struct {
	chainID string
	vals    *cmttypes.ValidatorSet
	keys    []crypto.PrivKey
	// appHash and consHash are block 1's (the genesis's).
	appHash, consHash []byte
	// start is block 1's time; block h is h seconds later.
	start time.Time
}

// newSigner is a signer for the chain doc starts, with keys (which must
// be the genesis's validators' for an honest chain).
func newSigner(t *testing.T, doc *cmttypes.GenesisDoc, keys ...crypto.PrivKey) *signer {
	t.Helper()
	gb, err := genesisBlockOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	var vs []*cmttypes.Validator
	for _, k := range keys {
		_, v := gb.vals.GetByAddress(k.PubKey().Address())
		power := int64(10)
		if v != nil {
			power = v.VotingPower
		}
		vs = append(vs, cmttypes.NewValidator(k.PubKey(), power))
	}
	return &signer{chainID: doc.ChainID, vals: cmttypes.NewValidatorSet(vs), keys: keys, appHash: gb.appHash, consHash: gb.consensusHash,
		start: time.Now().Add(-time.Hour).Truncate(time.Second)}
}

// extend returns a copy of c with blocks up to height to, signed by s;
// tag makes the app hashes of the new blocks (a fork from c's last block
// takes another tag).
func (s *signer) extend(t *testing.T, c chain, to int64, tag string) chain {
	t.Helper()
	out := maps.Clone(c)
	if out == nil {
		out = chain{}
	}
	var last *cmttypes.LightBlock
	for h := range out {
		if last == nil || h > last.Height {
			last = out[h]
		}
	}
	from := int64(1)
	if last != nil {
		from = last.Height + 1
	}
	for h := from; h <= to; h++ {
		hdr := &cmttypes.Header{
			Version: cmtversion.Consensus{Block: version.BlockProtocol}, ChainID: s.chainID, Height: h,
			Time: s.start.Add(time.Duration(h) * time.Second), ValidatorsHash: s.vals.Hash(), NextValidatorsHash: s.vals.Hash(),
			ConsensusHash: s.consHash, AppHash: s.appHash, ProposerAddress: s.vals.Validators[0].Address,
		}
		if h > 1 {
			hdr.AppHash = tmhash.Sum(fmt.Appendf(nil, "%s/%d", tag, h))
		}
		if last != nil {
			hdr.LastBlockID = cmttypes.BlockID{Hash: last.Hash(), PartSetHeader: cmttypes.PartSetHeader{Total: 1, Hash: tmhash.Sum(last.Hash())}}
		}
		id := cmttypes.BlockID{Hash: hdr.Hash(), PartSetHeader: cmttypes.PartSetHeader{Total: 1, Hash: tmhash.Sum(hdr.Hash())}}
		sigs := make([]cmttypes.CommitSig, s.vals.Size())
		for i := range sigs {
			sigs[i] = cmttypes.NewCommitSigAbsent()
		}
		for _, k := range s.keys {
			idx, _ := s.vals.GetByAddress(k.PubKey().Address())
			v := &cmttypes.Vote{Type: cmttypes.PrecommitType, Height: h, BlockID: id, Timestamp: hdr.Time.Add(time.Second),
				ValidatorAddress: k.PubKey().Address(), ValidatorIndex: idx}
			sig, err := k.Sign(cmttypes.VoteSignBytes(s.chainID, v.ToProto()))
			if err != nil {
				t.Fatal(err)
			}
			v.Signature = sig
			sigs[idx] = v.CommitSig()
		}
		lb := &cmttypes.LightBlock{SignedHeader: &cmttypes.SignedHeader{Header: hdr, Commit: &cmttypes.Commit{Height: h, BlockID: id, Signatures: sigs}}, ValidatorSet: s.vals}
		if err := lb.ValidateBasic(s.chainID); err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		out[h] = lb
		last = lb
	}
	return out
}

// from returns c without the blocks below height h (a node that joined
// by state sync at h).
func (c chain) from(h int64) chain {
	out := chain{}
	for k, v := range c {
		if k >= h {
			out[k] = v
		}
	}
	return out
}

// serve returns a provider of c's blocks.
func (c chain) serve(chainID string) provider.Provider {
	headers := map[int64]*cmttypes.SignedHeader{}
	vals := map[int64]*cmttypes.ValidatorSet{}
	for h, lb := range c {
		headers[h], vals[h] = lb.SignedHeader, lb.ValidatorSet
	}
	return mock.New(chainID, headers, vals)
}

// rpcNet is RPC servers by address, for newProvider; an address it does
// not have does not answer.
type rpcNet map[string]chain

func (n rpcNet) newProvider(chainID, addr string) (provider.Provider, error) {
	want, err := rpcURL(addr)
	if err != nil {
		return nil, err
	}
	for a, c := range n {
		if u, _ := rpcURL(a); u == want {
			return c.serve(chainID), nil
		}
	}
	return mock.NewDeadMock(chainID), nil
}

// testGenesis is a genesis of chain "joinme" whose validators are keys.
func testGenesis(t *testing.T, keys ...crypto.PrivKey) *cmttypes.GenesisDoc {
	t.Helper()
	st, err := json.Marshal(lt.Genesis(5, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	doc := &cmttypes.GenesisDoc{ChainID: "joinme", GenesisTime: time.Now().Add(-time.Hour), AppState: st}
	for _, k := range keys {
		doc.Validators = append(doc.Validators, cmttypes.GenesisValidator{PubKey: k.PubKey(), Power: 10})
	}
	if err := doc.ValidateAndComplete(); err != nil {
		t.Fatal(err)
	}
	return doc
}

func genKeys(n int) []crypto.PrivKey {
	out := make([]crypto.PrivKey, n)
	for i := range out {
		out[i] = ed25519.GenPrivKey()
	}
	return out
}

// TestVerifyJoinTrust: the header a join node offers is verified from the
// genesis (or a pinned header) with CometBFT's light client and checked
// against every RPC server; a server on another chain with the same
// chain id, a fork, a join node that lies about the header, and a join
// without a second witness are refused, naming who.
func TestVerifyJoinTrust(t *testing.T) {
	keys := genKeys(3)
	doc := testGenesis(t, keys...)
	honestS := newSigner(t, doc, keys...)
	honest := honestS.extend(t, nil, 50, "real")
	// Another chain with the same chain id and app state: other validators.
	forged := newSigner(t, doc, genKeys(3)...).extend(t, nil, 50, "forged")
	// The genesis's validators, but another app state at block 1.
	badApp := *honestS
	badApp.appHash = tmhash.Sum([]byte("1,000,000 SYNC for mallory"))
	forgedApp := badApp.extend(t, nil, 50, "forged")
	// The genesis's validators signing a second chain from height 30.
	fork := honestS.extend(t, honest.upTo(29), 50, "fork")

	const join, peer, peer2, witness = "10.0.0.1:26657", "10.0.0.2:26657", "10.0.0.3:26657", "http://10.0.0.4:26657"
	srcJoin := rpcSource{addr: join, from: "rpc_address of http://join", join: true}
	srcPeer := rpcSource{addr: peer, from: "RPC of peer abcd"}
	srcPeer2 := rpcSource{addr: peer2, from: "RPC of peer ef01"}
	srcWitness := rpcSource{addr: witness, from: "--witness"}
	claim := honest[40].Hash()
	for _, tc := range []struct {
		name    string
		net     rpcNet
		sources []rpcSource
		pin     *trustPin
		claim   []byte
		// want: the servers written, or words the error must say.
		servers []string
		want    []string
	}{
		{name: "honest", net: rpcNet{join: honest, peer: honest}, sources: []rpcSource{srcJoin, srcPeer}, servers: []string{join, peer}},
		{name: "witness flag", net: rpcNet{join: honest, witness: honest}, sources: []rpcSource{srcJoin, srcWitness}, servers: []string{join, witness}},
		{name: "state-synced peer", net: rpcNet{join: honest, peer: honest.from(30)}, sources: []rpcSource{srcJoin, srcPeer}, servers: []string{join, peer}},
		{name: "one witness silent, another confirms", net: rpcNet{join: honest, peer2: honest}, sources: []rpcSource{srcJoin, srcPeer, srcPeer2}, servers: []string{join, peer2}},
		{name: "pinned, join node alone", net: rpcNet{join: honest}, sources: []rpcSource{srcJoin}, pin: &trustPin{20, honest[20].Hash()}, servers: []string{join, join}},
		{name: "pinned above the offered height", net: rpcNet{join: honest, peer: honest}, sources: []rpcSource{srcJoin, srcPeer}, pin: &trustPin{45, honest[45].Hash()}, servers: []string{join, peer}},

		{name: "all servers on another chain", net: rpcNet{join: forged, peer: forged}, sources: []rpcSource{srcJoin, srcPeer}, claim: forged[40].Hash(),
			want: []string{"refusing", join, "rpc_address of http://join", peer, "another chain with the same chain id", "validators", "nothing written"}},
		{name: "genesis validators, other app state", net: rpcNet{join: honest, peer: forgedApp}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"refusing", peer, "app_state", "nothing written"}},
		{name: "witness on another chain", net: rpcNet{join: honest, peer: forged}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"refusing", peer, "RPC of peer abcd", "another chain"}},
		{name: "state-synced witness on another chain", net: rpcNet{join: honest, peer: forged.from(30)}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"refusing", peer, "does not verify from the genesis"}},
		{name: "state-synced join node on another chain", net: rpcNet{join: forged.from(30), peer: honest}, sources: []rpcSource{srcJoin, srcPeer}, claim: forged[40].Hash(),
			want: []string{"refusing", join, "does not verify from the genesis"}},
		{name: "fork signed by the validators", net: rpcNet{join: honest, peer: fork}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"refusing", "fork", join, peer}},
		{name: "join node lies about the header", net: rpcNet{join: honest, peer: honest}, sources: []rpcSource{srcJoin, srcPeer}, claim: forged[40].Hash(),
			want: []string{"refusing", "http://join", "trust_hash", fmt.Sprintf("%X", honest[40].Hash()), "lied"}},
		{name: "no witness", net: rpcNet{join: honest}, sources: []rpcSource{srcJoin},
			want: []string{"refusing", "--witness", "--trust-height", "--trust-hash"}},
		{name: "witness silent", net: rpcNet{join: honest}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"refusing", peer, "two nodes", "--witness"}},
		{name: "pinned header not the server's", net: rpcNet{join: honest}, sources: []rpcSource{srcJoin}, pin: &trustPin{20, forged[20].Hash()},
			want: []string{"refusing", join, "--trust-hash is wrong"}},
		{name: "pinned, join node on another chain", net: rpcNet{join: forged}, sources: []rpcSource{srcJoin}, pin: &trustPin{20, honest[20].Hash()}, claim: forged[40].Hash(),
			want: []string{"refusing", join, "not the pinned"}},
		{name: "nobody has block 1", net: rpcNet{join: honest.from(30), peer: honest.from(30)}, sources: []rpcSource{srcJoin, srcPeer},
			want: []string{"block 1", "--trust-height"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claim
			if tc.claim != nil {
				c = tc.claim
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			got, err := verifyJoinTrust(ctx, &trustCheck{joinURL: "http://join", doc: doc, sources: tc.sources, pin: tc.pin, height: 40, hash: c, newProvider: tc.net.newProvider})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if string(got.hash) != string(honest[40].Hash()) || got.height != 40 || strings.Join(got.servers, ",") != strings.Join(tc.servers, ",") {
					t.Fatalf("got height %d hash %X servers %v, want 40 %X %v", got.height, got.hash, got.servers, honest[40].Hash(), tc.servers)
				}
				return
			}
			if err == nil {
				t.Fatalf("verified (servers %v): want a refusal", got.servers)
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// upTo returns c without the blocks above height h.
func (c chain) upTo(h int64) chain {
	out := chain{}
	for k, v := range c {
		if k <= h {
			out[k] = v
		}
	}
	return out
}

// TestGenesisBlockOf: the validators of block 1 are the ledger's genesis
// set when the ledger bonds validators, genesis.json's otherwise.
func TestGenesisBlockOf(t *testing.T) {
	keys := genKeys(2)
	doc := testGenesis(t, keys...)
	gb, err := genesisBlockOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gb.vals.Hash(), doc.ValidatorHash(); string(got) != string(want) {
		t.Errorf("validators hash %X, want genesis.json's %X", got, want)
	}
	if gb.height != 1 || len(gb.appHash) == 0 {
		t.Errorf("height %d, app hash %X", gb.height, gb.appHash)
	}
	empty := *doc
	empty.Validators = nil
	if _, err := genesisBlockOf(&empty); err == nil || !strings.Contains(err.Error(), "no validators") {
		t.Errorf("no validators: %v", err)
	}
	bad := *doc
	bad.AppState = json.RawMessage(`{"accounts":"no"}`)
	if _, err := genesisBlockOf(&bad); err == nil || !strings.Contains(err.Error(), "app_state") {
		t.Errorf("bad app_state: %v", err)
	}
}
