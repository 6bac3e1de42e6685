//go:build !unix

package daemon

// raiseFDLimit does nothing where there is no RLIMIT_NOFILE.
func raiseFDLimit() (uint64, error) { return 0, nil }
