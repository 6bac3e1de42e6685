package cli

import (
	"github.com/gpunet/gpunet/internal/address"
)

// keyNames names the addresses the keyring of --home knows, so that
// output says "provider-1 (gpu1…)" where it would say only "gpu1…".
type keyNames map[address.Address]string

// names reads the keyring's names (public halves only: no passphrase). A
// missing or unreadable keyring names nothing.
func (e *env) names() keyNames {
	n := keyNames{}
	kr, err := e.keyring()
	if err != nil {
		return n
	}
	ks, err := kr.List()
	if err != nil {
		return n
	}
	for _, k := range ks {
		n[k.Address] = k.Name
	}
	return n
}

// addr writes a as "NAME (ADDRESS)" when the keyring knows it, else as
// the address.
func (n keyNames) addr(a address.Address) string {
	if name, ok := n[a]; ok {
		return name + " (" + a.String() + ")"
	}
	return a.String()
}

// name is the key name of a, or "" when the keyring does not know it.
func (n keyNames) name(a address.Address) string { return n[a] }
