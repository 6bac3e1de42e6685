package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/gpunet/gpunet/internal/cli.Version=v1.2.3".
var Version = "dev"

type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func versionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gpunet version",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v.Commit = s.Value
					}
				}
			}
			return e.print(v, func(w io.Writer) {
				fmt.Fprintf(w, "gpunet %s", v.Version)
				if v.Commit != "" {
					fmt.Fprintf(w, " (%.12s)", v.Commit)
				}
				fmt.Fprintf(w, " %s %s\n", v.GoVersion, v.Platform)
			})
		},
	}
}
