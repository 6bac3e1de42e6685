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

// Commit is the commit the binary was built from, for builds that cannot
// record it themselves (a source tarball, a container build without .git,
// GOFLAGS=-buildvcs=false): set it with
// -ldflags "-X github.com/gpunet/gpunet/internal/buildinfo.Commit=$(git rev-parse HEAD)".
// What go build records in a git checkout (vcs.revision) comes first.
var Commit = ""

// Info describes the running build.
type Info struct {
	Version string `json:"version"`
	// Commit is the VCS revision the build recorded (vcs.revision), else
	// the Commit variable; empty when neither says.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time (vcs.time, RFC 3339).
	CommitTime string `json:"commit_time,omitempty"`
	// Modified is true when the build's tree had uncommitted changes
	// (vcs.modified).
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read returns the running build's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, Version, Commit)
}

// fromBuildInfo is the Info of a build that recorded bi (nil: nothing),
// with version and commit as set with -ldflags.
func fromBuildInfo(bi *debug.BuildInfo, version, commit string) Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi == nil {
		return i
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	if i.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.CommitTime = s.Value
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
