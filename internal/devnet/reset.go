package devnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gpunet/gpunet/internal/keys"
)

// ResetPlan is what resetting a devnet home deletes and what it keeps:
// the chain and everything tied to it go, the keys a user added stay (a
// new chain gives them no balance, but their names, addresses and
// passphrases are the user's).
type ResetPlan struct {
	Home string `json:"home"`
	// Delete are the paths (relative to Home) that the reset removes,
	// each with what it is.
	Delete []PlannedPath `json:"delete"`
	// DevKeys are the devnet's own keys it deletes (alice, bob, operator,
	// provider-N): a new chain funds new ones.
	DevKeys []string `json:"dev_keys"`
	// KeptKeys are the other keys of the keyring, which it keeps.
	KeptKeys []string `json:"kept_keys"`
	// Kept are other paths it leaves alone (the provider's image cache).
	Kept []PlannedPath `json:"kept"`

	kr *keys.Keyring
}

// PlannedPath is a path in a devnet home and what it holds.
type PlannedPath struct {
	Path string `json:"path"`
	What string `json:"what"`
}

// devKeyName matches the names of the devnet's provider keys.
var devKeyName = regexp.MustCompile(`^provider-[0-9]+$`)

// IsDevKey reports whether name is one of the devnet's own keys (alice,
// bob, operator, provider-N), which it makes unencrypted and a reset
// replaces.
func IsDevKey(name string) bool {
	return slices.Contains(DevKeys, name) || name == OperatorKey || devKeyName.MatchString(name)
}

// homeParts are the paths a reset deletes, in order, and what each holds.
var homeParts = []PlannedPath{
	{"config", "the node's config and genesis"},
	{"data", "the chain: blocks and state"},
	{"logs", "the node's logs"},
	{"jobs", "the job keys of the old chain's jobs"},
	{"examples", "the bundled examples' files and outputs"},
	{stateFile, "the example job it ran, its registry's address"},
}

// PlanReset says what resetting the devnet in home would delete and keep.
// It deletes nothing.
func PlanReset(home string) (*ResetPlan, error) {
	p := &ResetPlan{Home: home}
	for _, part := range homeParts {
		if _, err := os.Stat(filepath.Join(home, part.Path)); err == nil {
			p.Delete = append(p.Delete, part)
		}
	}
	// The agents' status files and work directories belong to the old
	// chain; the executors' caches (compiled wasm, pulled images) do not.
	provDir := filepath.Join(home, "provider")
	entries, err := os.ReadDir(provDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		rel := filepath.Join("provider", e.Name())
		switch name := e.Name(); {
		case name == "oci":
			p.Kept = append(p.Kept, PlannedPath{rel, "the container executor's image cache"})
		case name == "wasm-cache":
			p.Kept = append(p.Kept, PlannedPath{rel, "the wasm executor's compilation cache"})
		case e.IsDir():
			p.Delete = append(p.Delete, PlannedPath{rel, "provider " + name + "'s work directory"})
		default:
			p.Delete = append(p.Delete, PlannedPath{rel, "a provider's status on the old chain"})
		}
	}
	kdir := filepath.Join(home, "keyring")
	if _, err := os.Stat(kdir); err == nil {
		if p.kr, err = keys.Open(kdir); err != nil {
			return nil, err
		}
		ks, err := p.kr.List()
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			if IsDevKey(k.Name) {
				p.DevKeys = append(p.DevKeys, k.Name)
			} else {
				p.KeptKeys = append(p.KeptKeys, k.Name)
			}
		}
	}
	return p, nil
}

// Do deletes what the plan lists.
func (p *ResetPlan) Do() error {
	for _, d := range p.Delete {
		if err := os.RemoveAll(filepath.Join(p.Home, d.Path)); err != nil {
			return err
		}
	}
	for _, name := range p.DevKeys {
		if err := p.kr.Delete(name); err != nil && !errors.Is(err, keys.ErrNotFound) {
			return fmt.Errorf("reset: %w", err)
		}
	}
	return nil
}
