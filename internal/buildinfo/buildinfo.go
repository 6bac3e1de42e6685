// Package buildinfo says which build of gpunet is running (its version,
// the commit it was built from, the Go release that built it) and exports
// it as the gpunet_build_info metric of every /metrics endpoint.
package buildinfo

import (
	"errors"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release, set at build time with
// -ldflags "-X github.com/gpunet/gpunet/internal/buildinfo.Version=v1.2.3".
// Left at "dev", Read takes the module's version when the binary was built
// with `go install …@v1.2.3`.
var Version = "dev"

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"` // the VCS revision, when the build recorded one
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read returns the running build's Info.
func Read() Info {
	i := Info{Version: Version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if i.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Register adds gpunet_build_info (constant 1, the build in its labels)
// to reg. Registering it twice on one registry (a devnet's node and its
// providers share one) is not an error.
func Register(reg prometheus.Registerer) error {
	i := Read()
	commit := i.Commit
	if commit != "" && i.Modified {
		commit += "-modified"
	}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpunet_build_info",
		Help:        "The running build: version, commit (the VCS revision; -modified when built from a changed tree) and goversion in its labels; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": commit, "goversion": i.GoVersion}},
		func() float64 { return 1 })
	if err := reg.Register(g); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return err
	}
	return nil
}
