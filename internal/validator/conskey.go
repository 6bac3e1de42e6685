package validator

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ConsensusKeyFile is where a home keeps its CometBFT validator key.
const ConsensusKeyFile = "config/priv_validator_key.json"

// consensusKeyFile is CometBFT's priv_validator_key.json, the parts gpunet
// reads (privval.LoadFilePV exits the process on a bad file).
type consensusKeyFile struct {
	PubKey struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"pub_key"`
	PrivKey struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"priv_key"`
}

func readConsensusKeyFile(home string) (*consensusKeyFile, string, error) {
	path := filepath.Join(home, ConsensusKeyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("consensus key: %w (is %s a node's home? `gpunet init` writes it)", err, home)
	}
	var k consensusKeyFile
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, path, fmt.Errorf("consensus key %s: %w", path, err)
	}
	return &k, path, nil
}

// ConsensusPubKey returns the ed25519 public key (32 bytes) of home's
// CometBFT validator key, the key `gpunet validator create` bonds stake
// for. It reads only the public half.
func ConsensusPubKey(home string) ([]byte, error) {
	k, path, err := readConsensusKeyFile(home)
	if err != nil {
		return nil, err
	}
	return k.pub(path)
}

func (k *consensusKeyFile) pub(path string) ([]byte, error) {
	if k.PubKey.Type != "tendermint/PubKeyEd25519" {
		return nil, fmt.Errorf("consensus key %s is of type %q; gpunet validators use ed25519 (tendermint/PubKeyEd25519)", path, k.PubKey.Type)
	}
	pub, err := base64.StdEncoding.DecodeString(k.PubKey.Value)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("consensus key %s: pub_key.value is not 32 bytes of base64 (%v)", path, err)
	}
	return pub, nil
}

// ConsensusPoP signs, with home's CometBFT validator key, the proof of
// possession that lets operator bond stake for it on chainID
// (ledger.ValidatorPoPBytes), and returns the public key and the proof. The
// private key is read, used and dropped here; it never leaves the process.
func ConsensusPoP(home, chainID string, operator address.Address) (pub, pop []byte, err error) {
	key, err := ConsensusPrivKey(home)
	if err != nil {
		return nil, nil, err
	}
	return key.Public().(ed25519.PublicKey), ledger.SignValidatorPoP(key, chainID, operator), nil
}

// ConsensusPrivKey reads home's CometBFT validator key, private half
// included: what a node signs its service witness attestations with
// (ledger.MsgAttestServed, internal/daemon's witness). A remote signer's
// home has none.
func ConsensusPrivKey(home string) (ed25519.PrivateKey, error) {
	k, path, err := readConsensusKeyFile(home)
	if err != nil {
		return nil, err
	}
	pub, err := k.pub(path)
	if err != nil {
		return nil, err
	}
	if k.PrivKey.Type != "tendermint/PrivKeyEd25519" {
		return nil, fmt.Errorf("consensus key %s: priv_key is of type %q, want tendermint/PrivKeyEd25519 (is this a remote signer's home? make the pop where the key is)", path, k.PrivKey.Type)
	}
	priv, err := base64.StdEncoding.DecodeString(k.PrivKey.Value)
	if err != nil || len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("consensus key %s: priv_key.value is not 64 bytes of base64 (%v)", path, err)
	}
	key := ed25519.PrivateKey(priv)
	if !bytes.Equal(key.Public().(ed25519.PublicKey), pub) {
		return nil, fmt.Errorf("consensus key %s: priv_key is not the private half of pub_key", path)
	}
	return key, nil
}
