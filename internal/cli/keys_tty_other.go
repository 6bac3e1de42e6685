//go:build !linux

package cli

import (
	"errors"
	"os"
)

// noEcho is not implemented here: give the passphrase with
// --keyring-passphrase-file or $GPUNET_KEYRING_PASSPHRASE.
func noEcho(*os.File) (func(), error) {
	return nil, errors.New("no hidden prompt on this system: give it with --keyring-passphrase-file FILE or $GPUNET_KEYRING_PASSPHRASE")
}
