package abciapp

import (
	"fmt"
	"slices"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"

	"github.com/gpunet/gpunet/internal/ledger"
)

// The validator set between CometBFT and the ledger: the last commit's votes
// and the block's evidence go in (ledger.BlockInfo), the set's changes come
// out (FinalizeBlockResponse.ValidatorUpdates, which CometBFT applies from
// two heights on), and InitChain returns the ledger's genesis set.

// ed25519KeyType is CometBFT's name for ed25519 consensus keys.
const ed25519KeyType = "ed25519"

// commitVotes converts DecidedLastCommit's votes: a precommit for the block
// or for nil counts as signed (the validator was online), as in the Cosmos
// SDK's x/slashing.
func commitVotes(ci abci.CommitInfo) []ledger.VoteInfo {
	if len(ci.Votes) == 0 {
		return nil
	}
	out := make([]ledger.VoteInfo, 0, len(ci.Votes))
	for _, v := range ci.Votes {
		var vi ledger.VoteInfo
		if len(v.Validator.Address) != len(vi.Address) {
			continue
		}
		copy(vi.Address[:], v.Validator.Address)
		vi.Signed = v.BlockIdFlag != cmtproto.BlockIDFlagAbsent
		out = append(out, vi)
	}
	return out
}

// misbehavior converts the block's evidence.
func misbehavior(ms []abci.Misbehavior) []ledger.Misbehavior {
	var out []ledger.Misbehavior
	for _, m := range ms {
		var lm ledger.Misbehavior
		if len(m.Validator.Address) != len(lm.Address) {
			continue
		}
		copy(lm.Address[:], m.Validator.Address)
		switch m.Type {
		case abci.MISBEHAVIOR_TYPE_DUPLICATE_VOTE:
			lm.Kind = ledger.MisbehaviorDuplicateVote
		case abci.MISBEHAVIOR_TYPE_LIGHT_CLIENT_ATTACK:
			lm.Kind = ledger.MisbehaviorLightClientAttack
		default:
			continue
		}
		lm.Height, lm.Time = m.Height, m.Time
		out = append(out, lm)
	}
	return out
}

// validatorUpdates converts the ledger's changes to CometBFT's.
func validatorUpdates(ups []ledger.ValidatorUpdate) []abci.ValidatorUpdate {
	if len(ups) == 0 {
		return nil
	}
	out := make([]abci.ValidatorUpdate, len(ups))
	for i, u := range ups {
		out[i] = abci.ValidatorUpdate{Power: int64(u.Power), PubKeyType: ed25519KeyType, PubKeyBytes: slices.Clone(u.PubKey)}
	}
	return out
}

// genesisValidators returns the set InitChain gives CometBFT: the ledger's
// when its genesis lists validators, after checking that genesis.json's
// validators (req) are the same keys with the same powers; none (CometBFT
// keeps genesis.json's) when it lists none.
func genesisValidators(kv ledger.KV, req []abci.ValidatorUpdate) ([]abci.ValidatorUpdate, error) {
	if !ledger.ManagesValidators(kv) {
		return nil, nil
	}
	set, err := ledger.ActiveValidators(kv)
	if err != nil {
		return nil, err
	}
	ours := validatorUpdates(set)
	if len(req) == 0 {
		return ours, nil
	}
	key := func(u abci.ValidatorUpdate) string {
		return fmt.Sprintf("%s/%X/%d", u.PubKeyType, u.PubKeyBytes, u.Power)
	}
	theirs := make([]string, len(req))
	for i, u := range req {
		theirs[i] = key(u)
	}
	want := make([]string, len(ours))
	for i, u := range ours {
		want[i] = key(u)
	}
	slices.Sort(theirs)
	slices.Sort(want)
	if !slices.Equal(theirs, want) {
		return nil, fmt.Errorf("genesis.json lists validators %v, the ledger's genesis (app_state.validators) calls for %v (type/pubkey/power): they must agree", theirs, want)
	}
	return ours, nil
}
