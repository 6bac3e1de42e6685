package validator

import (
	"reflect"
	"sync"

	cmtcfg "github.com/cometbft/cometbft/config"
	nm "github.com/cometbft/cometbft/node"
	"github.com/prometheus/client_golang/prometheus"
)

// CometNamespace prefixes CometBFT's own metrics on a node's /metrics:
// cometbft_consensus_height, cometbft_p2p_peers, … (CometBFT's default
// namespace, as its documentation names them).
const CometNamespace = "cometbft"

// defaultRegisterer serialises the swaps of prometheus.DefaultRegisterer
// that cometMetrics makes.
var defaultRegisterer sync.Mutex

// cometMetrics is a CometBFT metrics provider that registers CometBFT's
// metrics with reg. CometBFT's generated constructors register every
// vector with prometheus.DefaultRegisterer and panic on a second
// registration, so that a second node in one process (a test, a node
// restarted in place) could not have its own, and the default registry
// would serve them on no listener of ours. Here the constructors run with
// the default registerer swapped for reg, under a lock; nothing else in
// gpunet uses the default registerer. reg must be new to CometBFT's
// metrics: one registry per node start.
func cometMetrics(reg prometheus.Registerer) nm.MetricsProvider {
	build := reflect.ValueOf(nm.DefaultMetricsProvider(&cmtcfg.InstrumentationConfig{Prometheus: true, Namespace: CometNamespace}))
	// A MetricsProvider returns types of CometBFT's internal packages, so
	// no function of its type can be written here: it is made.
	swapped := reflect.MakeFunc(build.Type(), func(args []reflect.Value) []reflect.Value {
		defaultRegisterer.Lock()
		defer defaultRegisterer.Unlock()
		saved := prometheus.DefaultRegisterer
		prometheus.DefaultRegisterer = reg
		defer func() { prometheus.DefaultRegisterer = saved }()
		return build.Call(args)
	})
	return swapped.Interface().(nm.MetricsProvider)
}
