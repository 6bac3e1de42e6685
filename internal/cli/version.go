package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/buildinfo"
)

// versionInfo is version's JSON.
type versionInfo struct {
	buildinfo.Info
	Platform string `json:"platform"`
}

func versionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gpunet version, the commit it was built from, and the Go release that built it",
		Long: `Print the version (set with -ldflags "-X github.com/gpunet/gpunet/internal/buildinfo.Version=v1.2.3",
or the module version of go install …@v1.2.3, or the pseudo-version go build
derives from the commit), the commit and its time (recorded by go build in a
git checkout; not by go run, nor with -buildvcs=false, which 'go env GOFLAGS'
may hold; elsewhere set with -ldflags "-X
github.com/gpunet/gpunet/internal/buildinfo.Commit=$(git rev-parse HEAD)"),
whether the tree had changes, and the Go release and platform.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Info: buildinfo.Read(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			return e.print(v, func(w io.Writer) {
				fmt.Fprintf(w, "gpunet %s\n", v.Version)
				when := ""
				if v.CommitTime != "" {
					when = " (" + v.CommitTime + ")"
				}
				switch {
				case v.Commit == "":
					fmt.Fprintln(w, "commit:   unknown (built without VCS information: go run, a tree without .git, or -buildvcs=false, which 'go env GOFLAGS' may hold; "+
						"go build -buildvcs=true in a git checkout records it, or -ldflags \"-X github.com/gpunet/gpunet/internal/buildinfo.Commit=$(git rev-parse HEAD)\")")
				case v.Modified:
					fmt.Fprintf(w, "commit:   %s%s, with uncommitted changes\n", v.Commit, when)
				default:
					fmt.Fprintf(w, "commit:   %s%s\n", v.Commit, when)
				}
				fmt.Fprintf(w, "go:       %s %s\n", v.GoVersion, v.Platform)
			})
		},
	}
}
