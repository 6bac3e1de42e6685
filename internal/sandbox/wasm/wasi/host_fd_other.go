//go:build !(darwin || linux || openbsd)

package wasi

import (
	"errors"
	"os"
)

// Without preadv, pwritev and fstatat, reads and writes go through
// os.File, one buffer at a time, and listings through os.Root.
const maxHostIovecs = 0

func hostFD(*os.File) (int, bool) { return 0, false }

var errNoIovecs = errors.New("no preadv, pwritev or fstatat on this host")

func preadv(int, [][]byte, int64) (int, error)  { return 0, errNoIovecs }
func pwritev(int, [][]byte, int64) (int, error) { return 0, errNoIovecs }

func statAt(int, string) (fileID, uint64, uint8, error) { return fileID{}, 0, 0, errNoIovecs }
