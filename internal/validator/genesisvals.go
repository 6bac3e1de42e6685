package validator

import (
	"bytes"
	"encoding/json"
	"fmt"

	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// DefaultValidatorStake is what `gpunet init` bonds for each validator
// unless told otherwise: 100 SYNC, ten times the default
// params.min_validator_stake.
const DefaultValidatorStake = 100_000_000

// DefaultOperatorBalance is each validator operator's genesis balance
// unless told otherwise (1000 SYNC): enough for the fees of unjail and
// bond txs.
const DefaultOperatorBalance = 1_000_000_000

// DefaultWitnessBalance is the genesis balance of each validator's
// witness account (the account of its consensus key, which signs its
// node's service attestations, ledger msg 83) when validators are bonded
// at genesis: 10 SYNC, the fees of 10,000 attestations at the default
// min_fee (a period's replicas go in one).
const DefaultWitnessBalance = 10_000_000

// bondGenesisValidators, when o bonds validators (ValidatorStake > 0),
// writes each home's validator into the ledger's genesis, operated by the
// account o.OperatorKey returns for that home, with its consensus key's
// proof of possession for that operator on o.ChainID, funded with
// o.OperatorBalance; then it sets genesis.json's validators to the set the
// ledger starts with (so that InitChain finds them equal) and CometBFT's
// evidence window to the ledger's. pubs are the homes' consensus keys.
func bondGenesisValidators(o *InitOptions, gen *cmttypes.GenesisDoc, homes []string, pubs [][]byte) error {
	if o.ValidatorStake == 0 {
		return nil
	}
	if o.OperatorKey == nil {
		return fmt.Errorf("validator stake given but no operator key source")
	}
	g := o.Genesis
	g.Accounts = append([]ledger.GenesisAccount(nil), g.Accounts...)
	for i, h := range homes {
		op, err := o.OperatorKey(h)
		if err != nil {
			return fmt.Errorf("operator key of %s: %w", h, err)
		}
		// The proof of possession, signed with the key init just wrote:
		// the genesis says no more about a node's key than the key says.
		pub, pop, err := ConsensusPoP(h, o.ChainID, op)
		if err != nil {
			return err
		}
		if !bytes.Equal(pub, pubs[i]) {
			return fmt.Errorf("consensus key of %s changed while init wrote it", h)
		}
		g.Validators = append(g.Validators, ledger.GenesisValidator{Operator: op, PubKey: pub, Stake: o.ValidatorStake, Moniker: fmt.Sprintf("node%d", i), PoP: pop})
		if o.OperatorBalance > 0 {
			g.Accounts = addBalance(g.Accounts, op, o.OperatorBalance)
		}
		if o.WitnessBalance > 0 {
			g.Accounts = addBalance(g.Accounts, address.FromPubKey(pub), o.WitnessBalance)
		}
	}
	set, err := ledger.GenesisValidatorSet(o.ChainID, g)
	if err != nil {
		return fmt.Errorf("ledger genesis: %w", err)
	}
	var vals []cmttypes.GenesisValidator
	for _, gv := range gen.Validators {
		for _, v := range set {
			if bytes.Equal(gv.PubKey.Bytes(), v.PubKey) {
				gv.Power = int64(v.Power)
				vals = append(vals, gv)
			}
		}
	}
	if len(vals) != len(set) {
		return fmt.Errorf("the ledger's genesis set has %d validators, %d of them this network's", len(set), len(vals))
	}
	gen.Validators = vals
	gen.ConsensusParams.Evidence.MaxAgeNumBlocks = int64(g.Params.EvidenceMaxAgeBlocks)
	if gen.AppState, err = json.Marshal(g); err != nil {
		return err
	}
	o.Genesis = g
	return nil
}

// addBalance adds amt to addr's genesis allocation, or allocates it.
func addBalance(accts []ledger.GenesisAccount, addr address.Address, amt uint64) []ledger.GenesisAccount {
	for i := range accts {
		if accts[i].Address == addr {
			accts[i].Balance += amt
			return accts
		}
	}
	return append(accts, ledger.GenesisAccount{Address: addr, Balance: amt})
}
