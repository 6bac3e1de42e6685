package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/gpunet/gpunet/internal/address"
)

// Genesis: the state a chain starts from.

// Genesis is the ledger's part of the genesis document (CometBFT's
// app_state).
type Genesis struct {
	Params   Params           `json:"params"`
	Accounts []GenesisAccount `json:"accounts"`
	// Treasury is the treasury's initial balance: it pays audit and
	// escalation replicas of spot jobs (verification.go) until fees and slashes
	// keep it.
	Treasury uint64 `json:"treasury,omitempty"`
	// Validators are bonded at genesis; their stake is added to the
	// supply, not taken from the operators' balances. A genesis that
	// lists none keeps CometBFT's genesis validators as a fixed set.
	Validators []GenesisValidator `json:"validators,omitempty"`
	// AttestRoots are the SHA-256 (hex) of the DER root certificates TEE
	// evidence may chain to (tee.go); none: DefaultAttestRoots.
	AttestRoots []string `json:"attest_roots,omitempty"`
}

// GenesisAccount is an initial allocation.
type GenesisAccount struct {
	Address address.Address `json:"address"`
	Balance uint64          `json:"balance"`
}

// InitGenesis builds the initial state on an empty base and returns its
// change set and app hash.
func (l *Ledger) InitGenesis(base KV, chainID string, g Genesis) ([]Change, []byte, error) {
	if chainID == "" || len(chainID) > maxChainIDLen {
		return nil, nil, fmt.Errorf("chain id %q must be 1 to %d bytes: %w", chainID, maxChainIDLen, ErrInvalidGenesis)
	}
	// A genesis from before services sets none of their parameters.
	g.Params = g.Params.withLaterDefaults()
	if err := g.Params.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", err, ErrInvalidGenesis)
	}
	if err := checkAttestRoots(g.AttestRoots); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", err, ErrInvalidGenesis)
	}
	if base.Get(keyChainID) != nil {
		return nil, nil, fmt.Errorf("state already initialised: %w", ErrInvalidGenesis)
	}
	o := NewOverlay(base)
	o.Set(keyChainID, []byte(chainID))
	setUint(o, keyStateVersion, StateVersion)
	pb, _ := encodeParams(g.Params)
	o.Set(keyParams, pb)
	if len(g.AttestRoots) > 0 {
		rb, _ := json.Marshal(g.AttestRoots)
		o.Set(keyAttestRoots, rb)
	}
	var supply uint64
	seen := make(map[address.Address]bool)
	for i, ga := range g.Accounts {
		if ga.Address.IsZero() {
			return nil, nil, fmt.Errorf("accounts[%d]: zero address: %w", i, ErrInvalidGenesis)
		}
		if seen[ga.Address] {
			return nil, nil, fmt.Errorf("accounts[%d]: %s listed twice: %w", i, ga.Address, ErrInvalidGenesis)
		}
		seen[ga.Address] = true
		if supply+ga.Balance < supply {
			return nil, nil, fmt.Errorf("accounts[%d]: total supply overflows: %w", i, ErrInvalidGenesis)
		}
		supply += ga.Balance
		setAccount(o, &Account{Address: ga.Address, Balance: ga.Balance})
	}
	if supply+g.Treasury < supply {
		return nil, nil, fmt.Errorf("treasury: total supply overflows: %w", ErrInvalidGenesis)
	}
	supply += g.Treasury
	staked, err := initValidators(o, g)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", err, ErrInvalidGenesis)
	}
	if supply+staked < supply {
		return nil, nil, fmt.Errorf("validators: total supply overflows: %w", ErrInvalidGenesis)
	}
	supply += staked
	setUint(o, keySupply, supply)
	setUint(o, keyGenesisSupply, supply)
	setUint(o, keyTreasury, g.Treasury)
	setUint(o, keyStaked, 0)
	setUint(o, keyUnbonding, 0)
	setUint(o, keyOnlineCount, 0)
	setUint(o, keyEscrow, 0)
	setUint(o, keyHeight, 0)
	return finish(base, o)
}
