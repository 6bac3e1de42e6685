// Package devnet sets up a local development network in a home: a single
// validator, bonded in the ledger by the key "operator" (OperatorKey), funded
// dev keys (alice, bob) in the home's keyring, and a genesis that gives them
// tokens.
//
// The devnet's own keys (alice, bob, operator, its providers) are stored UNENCRYPTED,
// so that a devnet starts and is used without a passphrase: they are test
// keys of a throwaway local chain. Keys added with `gpunet keys add` are
// encrypted as anywhere else.
package devnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// ChainID is the devnet's chain id.
const ChainID = "gpunet-devnet"

// DevKeys are the funded dev keys.
var DevKeys = []string{"alice", "bob"}

// OperatorKey is the name of the key that operates the devnet's validator:
// its genesis bond (validator.DefaultValidatorStake) and balance
// (validator.DefaultOperatorBalance) are the ledger's, as on a network
// `gpunet init` writes, so that the set is the ledger's (query validators
// lists it) and holders delegate to it and vote.
const OperatorKey = "operator"

// DevBalance is what each dev key starts with: 1,000,000 SYNC.
const DevBalance = 1_000_000 * 1_000_000

// Options tune Setup.
type Options struct {
	Reset     bool
	BlockTime time.Duration
	// HWTarget, when set, is the hardware challenges' compute time at the
	// claimed throughput in a new chain's genesis (params.hw_target_millis):
	// shorter challenges come more often (one per device per 75 × HWTarget
	// at most), which a demo of them wants.
	HWTarget time.Duration
	// NoHWChallenges gives a new chain's genesis no hardware challenges
	// (params.hw_rate_ppm 0), for tests whose subject they are not: a
	// challenge's deadline depends on how busy the machine is.
	NoHWChallenges bool
	// ServiceCheckRatePPM, when set, is a new chain's
	// params.service_check_rate_ppm (default DevServiceCheckRatePPM).
	ServiceCheckRatePPM uint64
}

// DevServiceCheckRatePPM is a devnet's share of sampled OpenAI requests:
// 25% (the default is 4%), so that a --faulty provider, wrong on half its
// answers, is caught within a few dozen requests (docs/ledger.md,
// "Service disputes").
const DevServiceCheckRatePPM = 250_000

// Setup makes home a devnet home if it is not one yet (or when Reset is
// set) and reports whether it created a new chain. A home that holds a
// non-devnet node is never touched.
func Setup(home string, o Options) (created bool, err error) {
	c, err := validator.LoadConfig(home)
	switch {
	case err == nil && !c.Devnet:
		return false, fmt.Errorf("%s holds a node that is not a devnet; devnet will not touch it (use another --home)", home)
	case err == nil && !o.Reset:
		if o.BlockTime > 0 && time.Duration(c.BlockTime) != o.BlockTime {
			c.BlockTime = validator.Duration(o.BlockTime)
			if err := validator.SaveConfig(home, c); err != nil {
				return false, err
			}
		}
		return false, nil
	case err == nil && o.Reset:
		plan, err := PlanReset(home)
		if err != nil {
			return false, err
		}
		if err := plan.Do(); err != nil {
			return false, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return false, err
	}
	g := ledger.Genesis{Params: ledger.DefaultParams()}
	g.Params.UnbondingBlocks = 100 // a devnet does not need to wait a week
	g.Params.LivenessWindow = 5    // nor long to notice a provider is gone
	g.Params.RevealTimeout = 30    // replicas reveal within seconds; a lost one should not hold a job long
	// Checkpoints every second, for tests and demos of resuming; a real
	// chain's minimum is a minute (params.checkpoint_min_interval).
	g.Params.CheckpointMinInterval = 1
	// A preempted spot job checkpoints within 10 s (not 2 minutes), so
	// that preemption and resuming show in a test or a demo.
	g.Params.PreemptGraceSeconds = 10
	// Services that notice a silent replica within seconds: heartbeats
	// every 2 s, a replica dropped after 8 s without one, and the budget
	// warning 20 s before it runs out (defaults: 30 s, 2 minutes, an hour),
	// so that drops, replacements and a budget's end show in a test.
	g.Params.ServiceHeartbeatInterval = 2
	g.Params.ServiceHeartbeatTimeout = 8
	g.Params.ServiceBudgetWarning = 20
	g.Params.ServiceCheckRatePPM = DevServiceCheckRatePPM
	if o.ServiceCheckRatePPM > 0 {
		g.Params.ServiceCheckRatePPM = o.ServiceCheckRatePPM
	}
	// Billing periods of 2 s (default 30 s): the node's witness sees a
	// replica serve, and it is paid, within seconds (and, min_fee being
	// 0, its attestations need no funds).
	g.Params.ServiceServePeriod = 2
	// The market and rewards to watch in a minute or two ('gpunet devnet
	// --help' says so): an epoch of DevEpochBlocks (20 s at the default
	// block time; the default is an hour), and DevEmissionTarget minted
	// each epoch less what jobs paid, at most half the protocol fees
	// paid in it (params.reward_fee_cap_ppm). Prices stay the providers'
	// asks unless demand lifts the index from its floor, which takes
	// dozens of busy epochs, so the e2e tests' balances come out exact.
	g.Params.EpochBlocks = DevEpochBlocks
	g.Params.EmissionTarget = DevEmissionTarget
	// No minimum fee: balances in the README and the e2e tests come out
	// exact. Clients pay params.min_fee whatever it is (chainclient), so a
	// devnet with the default runs the same flows.
	g.Params.MinFee = 0
	// Governance to watch in a minute (gpunet devnet --help says so):
	// 20-block deposit and voting periods (20 s at the default block
	// time) and a 10 SYNC minimum deposit.
	g.Params.GovDepositBlocks = DevGovPeriodBlocks
	g.Params.GovVotingBlocks = DevGovPeriodBlocks
	g.Params.GovMinDeposit = DevGovMinDeposit
	g.Treasury = DevBalance // pays the audits of spot jobs
	if o.HWTarget > 0 {
		// Short challenges for a demo, and an allowance of three of the
		// devnet's blocks (not the default's one 6-s block), so that the
		// deadline still tells an overclaim from an honest claim.
		g.Params.HWTargetMillis = uint64(o.HWTarget.Milliseconds())
		g.Params.HWAllowanceMillis = uint64(3 * max(o.BlockTime, time.Second).Milliseconds())
	}
	if o.NoHWChallenges {
		g.Params.HWRatePPM = 0
	}
	for _, name := range DevKeys {
		k, err := kr.Get(name)
		if errors.Is(err, keys.ErrNotFound) {
			k, err = kr.AddUnencrypted(name) // a test key: see the package doc
		}
		if err != nil {
			return false, err
		}
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Address, Balance: DevBalance})
	}
	bt := o.BlockTime
	if bt == 0 {
		bt = time.Second
	}
	operator := func(string) (address.Address, error) {
		k, err := kr.Lookup(OperatorKey)
		if errors.Is(err, keys.ErrNotFound) {
			k, err = kr.AddUnencrypted(OperatorKey) // a test key: see the package doc
		}
		if err != nil {
			return address.Address{}, err
		}
		return k.Address, nil
	}
	o2 := validator.InitOptions{ChainID: ChainID, Validators: 1, Genesis: g, BlockTime: bt, Devnet: true,
		ValidatorStake: validator.DefaultValidatorStake, OperatorBalance: validator.DefaultOperatorBalance, OperatorKey: operator}
	if _, err := validator.Init(home, o2); err != nil {
		return false, err
	}
	c, err = validator.LoadConfig(home)
	if err != nil {
		return false, err
	}
	c.CheckInvariants = true
	if c.APIToken, err = NewAPIToken(); err != nil {
		return false, err
	}
	return true, validator.SaveConfig(home, c)
}

// A devnet's governance: deposit and voting periods of DevGovPeriodBlocks
// each, a minimum deposit of DevGovMinDeposit usync.
const (
	DevGovPeriodBlocks = 20
	DevGovMinDeposit   = 10_000_000
)

// A devnet's market: epochs of DevEpochBlocks, an emission target of
// DevEmissionTarget usync an epoch.
const (
	DevEpochBlocks    = 20
	DevEmissionTarget = 100_000_000
)

// NewAPIToken returns a random API token (32 hex characters) for a node's
// config: it lets the dashboard submit jobs with the node's keys.
func NewAPIToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
