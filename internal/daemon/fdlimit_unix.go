//go:build unix

package daemon

import "syscall"

// raiseFDLimit sets the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit in effect.
func raiseFDLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(r.Cur), err
		}
		r = want
	}
	return uint64(r.Cur), nil
}
