package daemon

// File descriptors. CometBFT needs descriptors to save its signing state,
// write its WAL and block store, and talk to peers; when the API took them
// all, a validator halted with "too many open files". So a node raises its
// soft RLIMIT_NOFILE to the hard limit at start and gives the API at most
// a quarter of it in connections: each API connection holds at most two
// descriptors (the socket and a blob's file), so the API never holds more
// than half, and consensus keeps the rest (with the usual hard limit of
// 524,288 or more, the API's cap of 1,024 connections is far below it).

const (
	// maxAPIConns caps the API's open connections whatever the limit.
	maxAPIConns = 1024
	// minAPIConns is the floor on a machine with a tiny limit.
	minAPIConns = 32
	// maxAPIConnsPerIP caps one client address's connections.
	maxAPIConnsPerIP = 128
)

// apiConnLimits sizes the API's connection caps for a descriptor limit of
// nofile (0: unknown).
func apiConnLimits(nofile uint64) (total, perIP int) {
	total = maxAPIConns
	if nofile > 0 && nofile/4 < uint64(total) {
		total = max(int(nofile/4), minAPIConns)
	}
	return total, min(maxAPIConnsPerIP, max(total/8, 8))
}
