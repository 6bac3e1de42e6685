package validator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// devnetBlobRetention is a devnet's blob_retention: a devnet's jobs are
// looked at within minutes.
const devnetBlobRetention = time.Hour

// InitOptions describe a new network.
type InitOptions struct {
	ChainID    string
	Validators int // number of validators; more than 1 writes home/node0 … home/nodeN-1
	Genesis    ledger.Genesis
	BlockTime  time.Duration
	Devnet     bool
	// GenesisTime is the chain's start time; zero means now.
	GenesisTime time.Time
	// ValidatorStake, when positive, bonds each validator in the ledger's
	// genesis, so that the ledger manages the set (genesisvals.go); its
	// operator is the account OperatorKey returns for its home, funded
	// with OperatorBalance. Zero keeps CometBFT's genesis set fixed.
	ValidatorStake  uint64
	OperatorBalance uint64
	OperatorKey     func(home string) (address.Address, error)
	// WitnessBalance funds each bonded validator's witness account, its
	// consensus key's, which pays the fees of its node's service
	// attestations (internal/daemon's witness).
	WitnessBalance uint64
	// SnapshotInterval is the nodes' snapshot_interval (0:
	// DefaultSnapshotInterval of the block time; negative: none).
	SnapshotInterval int
	// Net is where the nodes listen and whom they dial besides each
	// other. Its Listen host (default 127.0.0.1) gets a free port for
	// each service of each home; its listen and advertised addresses go
	// with one validator only (they would be the same for every home).
	Net NetOptions
}

// Init writes the homes of a new network: keys, genesis and config for each
// validator, with distinct free loopback ports and each validator a
// persistent peer of the others. It returns the homes written. When it
// fails, it removes the directories it created (a home whose operator key
// could not be made is no half-written network).
func Init(home string, o InitOptions) (_ []string, err error) {
	if o.Validators < 1 || o.Validators > 64 {
		return nil, fmt.Errorf("--validators %d out of range [1, 64]", o.Validators)
	}
	if o.ChainID == "" {
		return nil, errors.New("chain id is empty")
	}
	if o.BlockTime == 0 {
		o.BlockTime = time.Second
	}
	if o.Validators > 1 && (o.Net.API != "" || o.Net.P2P != "" || o.Net.RPC != "" || o.Net.ExternalAddress != "" || o.Net.AdvertiseAPI != "") {
		return nil, errors.New("--api, --p2p, --rpc, --external-address and --advertise-api go with --validators 1 (each home would get the same): " +
			"give --listen HOST for several validators on this machine, or init one validator's home per machine")
	}
	listen := "127.0.0.1"
	if o.Net.Listen != "" {
		var err error
		if listen, err = listenHost(o.Net.Listen); err != nil {
			return nil, fmt.Errorf("--listen %q: %w", o.Net.Listen, err)
		}
	}
	if ip, err := netip.ParseAddr(listen); err == nil && ip.IsUnspecified() && o.Validators > 1 {
		return nil, fmt.Errorf("--listen %s with --validators %d: the homes would have no address to tell each other and their clients; "+
			"give --listen an address of this machine, or init one validator's home per machine (then --external-address or --advertise-api)", listen, o.Validators)
	}
	if err := o.Net.Check(); err != nil {
		return nil, err
	}
	homeNet := o.Net
	homeNet.Listen = ""
	homes := []string{home}
	if o.Validators > 1 {
		homes = homes[:0]
		for i := 0; i < o.Validators; i++ {
			homes = append(homes, filepath.Join(home, fmt.Sprintf("node%d", i)))
		}
	}
	for _, h := range homes {
		if _, err := os.Stat(filepath.Join(h, ConfigFile)); err == nil {
			return nil, fmt.Errorf("%s is already initialised (remove it or choose another --home)", h)
		}
	}
	var fresh []string // what this call creates, removed if it fails
	for _, d := range append([]string{home}, homes...) {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			fresh = append(fresh, d)
		}
	}
	defer func() {
		if err != nil {
			for _, d := range fresh {
				os.RemoveAll(d)
			}
		}
	}()
	appState, err := json.Marshal(o.Genesis)
	if err != nil {
		return nil, err
	}
	gt := o.GenesisTime
	if gt.IsZero() {
		gt = time.Now().UTC().Truncate(time.Millisecond)
	}
	gen := &cmttypes.GenesisDoc{
		GenesisTime:     gt,
		ChainID:         o.ChainID,
		InitialHeight:   1,
		ConsensusParams: cmttypes.DefaultConsensusParams(),
		AppState:        appState,
	}
	var cfgs []*Config
	var ids []string
	var pubs [][]byte
	for i, h := range homes {
		for _, d := range []string{"config", "data", "logs"} {
			if err := os.MkdirAll(filepath.Join(h, d), 0o700); err != nil {
				return nil, err
			}
		}
		pv, err := privval.GenFilePV(filepath.Join(h, "config/priv_validator_key.json"), filepath.Join(h, "data/priv_validator_state.json"), func() (crypto.PrivKey, error) { return ed25519.GenPrivKey(), nil })
		if err != nil {
			return nil, err
		}
		pv.Save()
		nk, err := p2p.LoadOrGenNodeKey(filepath.Join(h, "config/node_key.json"))
		if err != nil {
			return nil, err
		}
		pub, err := pv.GetPubKey()
		if err != nil {
			return nil, err
		}
		pubs = append(pubs, pub.Bytes())
		name := fmt.Sprintf("node%d", i)
		gen.Validators = append(gen.Validators, cmttypes.GenesisValidator{Address: pub.Address(), PubKey: pub, Power: 10, Name: name})
		c := &Config{ChainID: o.ChainID, Moniker: name, BlockTime: Duration(o.BlockTime), Devnet: o.Devnet, LogLevel: "info"}
		c.SnapshotInterval = initSnapshotInterval(o)
		for _, p := range []*string{&c.API, &c.P2P, &c.RPC} {
			if *p, err = FreeAddrOn(listen); err != nil {
				if o.Net.Listen != "" {
					err = fmt.Errorf("--listen %q: %w", o.Net.Listen, err)
				}
				return nil, err
			}
		}
		if err := homeNet.Apply(c); err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
		ids = append(ids, string(nk.ID())+"@"+dialable(c.P2PAddress()))
	}
	if err := bondGenesisValidators(&o, gen, homes, pubs); err != nil {
		return nil, err
	}
	if err := gen.ValidateAndComplete(); err != nil {
		return nil, fmt.Errorf("genesis: %w", err)
	}
	for i, h := range homes {
		for j, id := range ids {
			if j != i && !slices.Contains(cfgs[i].PersistentPeers, id) {
				cfgs[i].PersistentPeers = append(cfgs[i].PersistentPeers, id)
				cfgs[i].PeerAPIs = append(cfgs[i].PeerAPIs, cfgs[j].APIURL())
			}
		}
		cfgs[i].AdvertiseAPI = cfgs[i].APIURL()
		if o.Devnet {
			cfgs[i].BlobRetention = Duration(devnetBlobRetention)
		}
		if err := gen.SaveAs(filepath.Join(h, "config/genesis.json")); err != nil {
			return nil, err
		}
		if err := SaveConfig(h, cfgs[i]); err != nil {
			return nil, err
		}
	}
	return homes, nil
}
