package ledger

// The state's layout: every key prefix, and which keys the app hash covers.
// A new area adds its prefixes here, so that one table shows that no two
// areas share one.

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// Key layout of the state. The app hash covers every key but these:
//   - those under metaPrefix: bookkeeping (the lattice hash itself);
//   - the scheduler's provider index and class summaries (pidx/, pcls/),
//     functions of the provider records;
//   - the job indexes: by owner (jobown/), by provider (jobprov/), by
//     deadline (jobdue/), the queues (jobq/, jobvq/, jobpq/) and the
//     ungranted placements (jobtent/), functions of the job records.
//   - the service indexes (svcown/, svcprov/, svcdue/, svcq/, svcmodel/,
//     svcact/), functions of the service records.
//
// CheckInvariants rebuilds the derived keys from the records, or checks them
// against the records, on every block in tests and on nodes that ask for
// it. A node whose index went wrong would act on it differently (place,
// expire, list other jobs), and the records, which are hashed, would then
// differ. Leaving them out halves the entries a placed job hashes: each of
// these keys is new in the block that writes it, so hashing it also cost a
// store read for its (absent) old value.
const metaPrefix = "\x00"

var unhashedPrefixes = [][]byte{[]byte(metaPrefix), prefixProviderIndex, prefixClassCount,
	prefixJobOwner, prefixJobProv, prefixJobDue, prefixJobQueue, prefixVerifyQ, prefixGovWeight, prefixGovRunning, prefixGovDelegated, prefixPriorityQ, prefixJobTentative, prefixMarketLive, prefixMarketTEELive, prefixTEEExpiry,
	prefixServiceOwner, prefixServiceProv, prefixServiceDue, prefixServiceQueue, prefixServiceModel, prefixServiceActive}

// Hashed reports whether the app hash covers key.
func Hashed(key []byte) bool {
	for _, p := range unhashedPrefixes {
		if bytes.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

// SchedulerIndexPrefixes are the key prefixes of the scheduler's index: the
// offers and the class summaries. They are derived from the provider
// records, are left out of the app hash (CheckInvariants rebuilds and
// compares them), and are read for every job placed, so a store may keep
// them in memory. Callers must not modify the result.
func SchedulerIndexPrefixes() [][]byte { return schedulerIndexPrefixes }

// Every key of the state, by area. Values are records (codec.go), 8-byte
// big-endian counters (getUint) or markers ([]byte{1}); <address> is 20
// raw bytes, <id>, <height> and <time> 8 big-endian bytes.
var (
	// The chain (ledger.go, genesis.go, params.go, supply.go).
	keyLtHash = []byte(metaPrefix + "lthash") // the lattice hash (commitment.go); not hashed
	// keyStateVersion holds StateVersion, written at genesis (not hashed):
	// a node refuses a state of another version at start (CheckStateVersion).
	keyStateVersion = []byte(metaPrefix + "state_version")
	keyHeight       = []byte("chain/height")
	keyChainID      = []byte("chain/id")
	keyParams       = []byte("chain/params")
	// keyAttestRoots: the SHA-256 of the TEE roots of trust, as JSON, when
	// the genesis set them (tee.go; absent: DefaultAttestRoots).
	keyAttestRoots = []byte("tee/roots")
	keySupply      = []byte("chain/supply")
	keyTreasury    = []byte("chain/treasury")

	// Accounts (accounts.go): acct/<address>.
	prefixAccount = []byte("acct/")

	// Providers (provider.go): prov/<address>, and the online index
	// online/i/<position> → address.
	prefixProvider = []byte("prov/")
	keyOnlineCount = []byte("online/count")
	prefixOnline   = []byte("online/i/")

	// The scheduler's index (scheduler.go, classes.go):
	// pidx/<class>/<price>/<address> → offer, pcls/<class> → summary. Not
	// hashed.
	prefixProviderIndex = []byte("pidx/")
	prefixClassCount    = []byte("pcls/")

	schedulerIndexPrefixes = [][]byte{prefixProviderIndex, prefixClassCount}

	// GPU bindings (gpubind.go): gpu/u/<uuid>, gpu/s/<serial>, and
	// gpu/a/<attested identity> (tee_gpu.go) → address.
	prefixGPUBinding  = []byte("gpu/")
	prefixGPUUUID     = []byte("gpu/u/")
	prefixGPUSerial   = []byte("gpu/s/")
	prefixGPUAttested = []byte("gpu/a/")

	// Staking (staking.go): unbond/<completion height><address> → amount.
	keyStaked       = []byte("chain/staked")
	prefixUnbonding = []byte("unbond/")
	keyUnbonding    = []byte("chain/unbonding")

	// Validators (validators.go): val/<consensus address> → record,
	// valop/<operator> → consensus address, the eligible validators by bond
	// valpow/<^bond><consensus address>, the set CometBFT has
	// valset/<consensus address> → power, missed blocks
	// valmiss/<consensus address><slot>, unbonding validator stake
	// valunb/<completion height><consensus address> → amount, start height.
	// All hashed. chain/valmanaged marks a chain whose genesis listed
	// validators; chain/valbonded and chain/valunbonding are the totals.
	// keyBlockFees counts the fees of the block being applied (validator
	// fee share); it is deleted by the block's end, so never committed.
	prefixValidator   = []byte("val/")
	prefixValOperator = []byte("valop/")
	prefixValPower    = []byte("valpow/")
	prefixValSet      = []byte("valset/")
	prefixValMissed   = []byte("valmiss/")
	prefixValUnbond   = []byte("valunb/")
	keyValManaged     = []byte("chain/valmanaged")
	keyValBonded      = []byte("chain/valbonded")
	keyValUnbonding   = []byte("chain/valunbonding")
	keyBlockFees      = []byte(metaPrefix + "blockfees")

	// Governance (gov.go, gov_deposit.go): proposals gov/p/<id>, the
	// queue of active proposals by the end of their period
	// gov/q/<end height><id>, deposits gov/d/<id><address> → amount,
	// votes gov/v/<id><address> → option (0 yes, 1 no, 2 abstain, 3
	// veto). gov/next is the last id, gov/active the active count,
	// gov/mindeposit the raised minimum deposit (absent: the base),
	// chain/govdeposits what the deposits hold. All hashed.
	keyGovNext       = []byte("gov/next")
	keyGovActive     = []byte("gov/active")
	keyGovMinDeposit = []byte("gov/mindeposit")
	keyGovDeposits   = []byte("chain/govdeposits")
	prefixProposal   = []byte("gov/p/")
	prefixGovQueue   = []byte("gov/q/")
	prefixGovDeposit = []byte("gov/d/")
	prefixGovVote    = []byte("gov/v/")
	// govw/<address> → voting weight (gov_weight.go): derived from the
	// provider and validator records, not hashed (CheckInvariants
	// rebuilds it).
	prefixGovWeight = []byte("govw/")
	// govt/<id> → a voting proposal's running tally (gov_running.go):
	// derived from the votes and the weights, not hashed.
	prefixGovRunning = []byte("govt/")
	// govds/<id><target> → the shares of the target's pool whose
	// delegators voted each option (gov_delegated.go): derived from the
	// votes and the delegations, not hashed.
	prefixGovDelegated = []byte("govds/")

	// Liveness challenges (liveness.go): livedl/<deadline><address>.
	prefixLivenessDeadline = []byte("livedl/")

	// Hardware challenges (hwchallenge.go).
	prefixHWOpen = []byte("hwc/") // hwc/<address>: providers with an open challenge

	// Jobs (jobs.go): job/<id>, and its indexes jobown/<owner><id>,
	// jobprov/<provider><id>, jobdue/<time><id> and the queues jobq/<id>,
	// jobvq/<id>. Only the records are hashed.
	keyNextJob     = []byte("jobs/next")
	keyEscrow      = []byte("chain/escrow")
	prefixJob      = []byte("job/")
	prefixJobQueue = []byte("jobq/")  // new and restarted jobs, in id order
	prefixVerifyQ  = []byte("jobvq/") // jobs waiting for a verification replica: placed first
	prefixJobOwner = []byte("jobown/")
	prefixJobProv  = []byte("jobprov/")
	prefixJobDue   = []byte("jobdue/")
	keyQueueCursor = []byte("jobs/cursor")
	keyQueueLen    = []byte("jobs/queued")
	// jobpq/<id>: priority-tier jobs, placed before the main queue
	// (market.go); not hashed, like the other queues.
	prefixPriorityQ = []byte("jobpq/")
	// jobtent/<provider><assigned at><^id>: the placements on a provider
	// whose key is not granted yet, oldest placement first (slots.go); not
	// hashed, like the other job indexes.
	prefixJobTentative = []byte("jobtent/")

	// The market (market.go): mkt/c/<class> → the class's record,
	// mkt/h/<class>/<epoch> → a closed epoch (the last
	// MarketHistoryEpochs), mkt/epoch → the open epoch. mktl/<class> →
	// the live offered and reserved units, derived from the provider and
	// job records: not hashed (CheckInvariants rebuilds them).
	prefixMarketClass = []byte("mkt/c/")
	prefixMarketHist  = []byte("mkt/h/")
	keyMarketEpoch    = []byte("mkt/epoch")
	prefixMarketLive  = []byte("mktl/")
	// The TEE market (market_tee.go): the same per class for attested
	// providers and trust: tee work, mkt/tc/<class>, mkt/th/<class>/<epoch>
	// and the live counts mkttl/<class> (not hashed). teeexp/<expiry><address>
	// lists the providers whose attestation has not lapsed yet, by expiry,
	// for the sweep that lapses it (not hashed: a function of the provider
	// records).
	prefixMarketTEEClass = []byte("mkt/tc/")
	prefixMarketTEEHist  = []byte("mkt/th/")
	prefixMarketTEELive  = []byte("mkttl/")
	prefixTEEExpiry      = []byte("teeexp/")

	// Supply changes and rewards (supply.go, rewards.go): the totals ever
	// burned and minted, the minted rewards not yet paid
	// (chain/rewardpool), the open epoch's demand (rwd/epoch), each
	// provider's unsettled work rwd/w/<address>, and each closed epoch's
	// rate rwd/r/<epoch> while providers still have to settle it.
	keyGenesisSupply = []byte("chain/genesis_supply")
	keyBurned        = []byte("chain/burned")
	keyMinted        = []byte("chain/minted")
	keyRewardPool    = []byte("chain/rewardpool")
	keyRewardEpoch   = []byte("rwd/epoch")
	prefixRewardWork = []byte("rwd/w/")
	prefixRewardRate = []byte("rwd/r/")

	// Delegation (delegation.go). <target> is a kind byte (1 validator,
	// by its operator; 2 provider) and the 20-byte address. The pools
	// dpool/<target> → record; delegations dlg/<delegator><target> →
	// record and their index by target dlgt/<target><delegator>;
	// unbonding delegations dub/<delegator><target> → record (its
	// entries), by target dubt/<target><delegator>, and the queue of
	// their completions dubq/<completion height><delegator><target>;
	// redelegations drd/<delegator><src><dst> → record, by source
	// drds/<src><delegator><dst>, and their queue
	// drdq/<completion height><delegator><src><dst>. Totals:
	// chain/delbonded (the pools' tokens), chain/delunbonding (the
	// unbonding entries' balances), chain/delrewards (the rewards the
	// pools hold for their delegators). All hashed.
	prefixDelPool       = []byte("dpool/")
	prefixDelegation    = []byte("dlg/")
	prefixDelByTarget   = []byte("dlgt/")
	prefixDelUnbond     = []byte("dub/")
	prefixDelUnbondT    = []byte("dubt/")
	prefixDelUnbondQ    = []byte("dubq/")
	prefixRedelegation  = []byte("drd/")
	prefixRedelBySource = []byte("drds/")
	prefixRedelQueue    = []byte("drdq/")
	keyDelBonded        = []byte("chain/delbonded")
	keyDelUnbonding     = []byte("chain/delunbonding")
	keyDelRewards       = []byte("chain/delrewards")
)

// The keys every tx's fee is staged under, as the strings an overlay keeps
// (collectFee).
var (
	keyTreasuryString  = string(keyTreasury)
	keyBlockFeesString = string(keyBlockFees)
)

// getUint reads an 8-byte counter; a missing key reads 0.
func getUint(kv KV, key []byte) uint64 {
	b := kv.Get(key)
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// setUint writes an 8-byte counter.
func setUint(o *Overlay, key []byte, v uint64) {
	o.setOwned(key, binary.BigEndian.AppendUint64(nil, v))
}

// u64 appends v to a key, big-endian so that keys sort by it.
func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// prefixEnd is the first key after every key that starts with p.
func prefixEnd(p []byte) []byte { return PrefixEnd(p) }

// PrefixEnd is the end of the key range that holds exactly the keys
// starting with p: p with its last byte below 0xFF incremented and what
// follows that byte cut; nil (no upper bound) when every byte is 0xFF.
// Incrementing the last byte alone wraps 0xFF to 0x00 and gives an end
// below the start: an empty range. Keys end with 20-byte addresses, 1 in
// 256 of which end with 0xFF: such a provider's job index read empty, so
// it never ran the jobs assigned to it (a CI run's job "key granted;
// waiting for the provider to start").
func PrefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Services (service.go): svc/<id> → record (JSON), svcs/next the last id;
// the indexes svcown/<owner><id>, svcprov/<provider><id> (active
// services' replicas), svcdue/<time><id> (service_billing.go), the queue
// svcq/<id> (services waiting for replicas), svcmodel/<model>\x00<id>
// (the active services that declare a model) and svcact/<id> (the active
// services). Only the record and the counter are hashed: the indexes are
// functions of the records, checked by serviceIndexesMatchRecords.
var (
	keyNextService      = []byte("svcs/next")
	prefixService       = []byte("svc/")
	prefixServiceOwner  = []byte("svcown/")
	prefixServiceProv   = []byte("svcprov/")
	prefixServiceDue    = []byte("svcdue/")
	prefixServiceQueue  = []byte("svcq/")
	prefixServiceModel  = []byte("svcmodel/")
	prefixServiceActive = []byte("svcact/")
	// svcdisp/<receipt ID> marks a receipt used in a dispute
	// (service_dispute.go); hashed.
	prefixServiceDisputed = []byte("svcdisp/")
)
