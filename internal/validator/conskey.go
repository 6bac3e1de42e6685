package validator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ConsensusKeyFile is where a home keeps its CometBFT validator key.
const ConsensusKeyFile = "config/priv_validator_key.json"

// ConsensusPubKey returns the ed25519 public key (32 bytes) of home's
// CometBFT validator key, the key `gpunet validator create` bonds stake
// for. It reads only the public half.
func ConsensusPubKey(home string) ([]byte, error) {
	path := filepath.Join(home, ConsensusKeyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("consensus key: %w (is %s a node's home? `gpunet init` writes it)", err, home)
	}
	var k struct {
		PubKey struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"pub_key"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("consensus key %s: %w", path, err)
	}
	if k.PubKey.Type != "tendermint/PubKeyEd25519" {
		return nil, fmt.Errorf("consensus key %s is of type %q; gpunet validators use ed25519 (tendermint/PubKeyEd25519)", path, k.PubKey.Type)
	}
	pub, err := base64.StdEncoding.DecodeString(k.PubKey.Value)
	if err != nil || len(pub) != 32 {
		return nil, fmt.Errorf("consensus key %s: pub_key.value is not 32 bytes of base64 (%v)", path, err)
	}
	return pub, nil
}
