package devnet

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// stateFile is the file, relative to the home, where a devnet keeps
// what is its own and not the node's: which example job ran, where its
// registry serves. A reset deletes it with the chain.
const stateFile = "devnet.json"

// state is what stateFile holds.
type state struct {
	// ExampleJob is the id of the example job that ran to success on
	// this chain, ExampleOut where its outputs were put.
	ExampleJob uint64 `json:"example_job,omitempty"`
	ExampleOut string `json:"example_out,omitempty"`
	// Registry is the address the devnet's registry last served on
	// (--registry), kept so that specs naming it stay valid.
	Registry string `json:"registry,omitempty"`
}

func readState(home string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(home, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func updateState(home string, change func(*state)) error {
	s, err := readState(home)
	if err != nil {
		return err
	}
	change(&s)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(home, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(home, stateFile))
}
