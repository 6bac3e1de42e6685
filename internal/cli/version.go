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
or the module version of go install …@v1.2.3), the commit (recorded by go
build in a git checkout; not by go run, nor with -buildvcs=false), whether
the tree had changes, and the Go release and platform.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Info: buildinfo.Read(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			return e.print(v, func(w io.Writer) {
				fmt.Fprintf(w, "gpunet %s\n", v.Version)
				switch {
				case v.Commit == "":
					fmt.Fprintln(w, "commit:   unknown (built without VCS information: go run, or go build -buildvcs=false; go build in a git checkout records it)")
				case v.Modified:
					fmt.Fprintf(w, "commit:   %s, with uncommitted changes\n", v.Commit)
				default:
					fmt.Fprintf(w, "commit:   %s\n", v.Commit)
				}
				fmt.Fprintf(w, "go:       %s %s\n", v.GoVersion, v.Platform)
			})
		},
	}
}
