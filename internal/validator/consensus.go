package validator

import (
	"context"
	"encoding/json"
	"fmt"

	cmttypes "github.com/cometbft/cometbft/types"
)

// Consensus is where the node's consensus stands: what an operator
// watches to see that blocks keep coming and why they might not.
type Consensus struct {
	Peers int // connected peers
	// Height and Round are the height being decided and its round: a
	// round above 0 means the round's proposal did not get through (a
	// proposer offline or slow, votes missing).
	Height int64
	Round  int32
	// LastCommitRound is the round the last block was committed in;
	// LastValidators the validators of its commit, LastAbsent those whose
	// precommit it lacks.
	LastCommitRound int32
	LastValidators  int
	LastAbsent      int
}

// Consensus reports the node's consensus now.
func (n *Node) Consensus(ctx context.Context) (Consensus, error) {
	c := Consensus{Peers: n.cmt.Switch().Peers().Size()}
	st, err := n.rpc.ConsensusState(ctx)
	if err != nil {
		return c, err
	}
	var rs struct {
		HRS string `json:"height/round/step"`
	}
	if err := json.Unmarshal(st.RoundState, &rs); err != nil {
		return c, fmt.Errorf("consensus round state: %w", err)
	}
	var step int
	if _, err := fmt.Sscanf(rs.HRS, "%d/%d/%d", &c.Height, &c.Round, &step); err != nil {
		return c, fmt.Errorf("consensus round state %q: %w", rs.HRS, err)
	}
	bs := n.cmt.BlockStore()
	if commit := bs.LoadSeenCommit(bs.Height()); commit != nil {
		c.LastCommitRound = commit.Round
		c.LastValidators = len(commit.Signatures)
		for _, s := range commit.Signatures {
			if s.BlockIDFlag == cmttypes.BlockIDFlagAbsent {
				c.LastAbsent++
			}
		}
	}
	return c, nil
}
