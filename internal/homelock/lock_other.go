//go:build !unix

package homelock

import "os"

// tryLock locks nothing where there is no flock: two processes may then
// share a home, as before this package (the lock file still names the
// last one).
func tryLock(*os.File) (held bool, err error) { return false, nil }
