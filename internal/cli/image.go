package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

func imageCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Container images: find an image's digest for a job spec, pre-pull one on a provider",
		Long: `Container jobs (executor: oci) name their image by digest, so that every
provider runs the same bytes. These commands talk to the image's registry
directly: registries on 127.0.0.1 or localhost over plain HTTP, all others
over HTTPS, with credentials from Docker's config ($DOCKER_CONFIG or
~/.docker/config.json, as docker login writes them).`,
	}
	c.AddCommand(imageDigestCmd(e), imagePullCmd(e))
	return c
}

func imageDigestCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "digest REF",
		Short: "Resolve an image reference (a tag) to REPO@sha256:… for a job spec's image field",
		Long: `Ask the registry which digest REF (e.g. pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime
or 127.0.0.1:5000/tools/wc:latest) names now, and print the reference to
put in a job spec. A multi-platform image resolves to its index, which each
provider narrows to its own platform; the platforms are listed.`,
		Example: `  gpunet image digest 127.0.0.1:5000/tools/wc:latest
  gpunet image digest pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime --output json`,
		Args: exactArgs("REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := oci.Resolve(cmd.Context(), args[0], oci.RegistryOptions{})
			if errors.Is(err, oci.ErrBadRef) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return e.print(r, func(w io.Writer) {
				fmt.Fprintln(w, r.Ref)
				if len(r.Platforms) > 0 {
					fmt.Fprintf(w, "# an index of %d images: %s\n", len(r.Platforms), strings.Join(r.Platforms, ", "))
				}
			})
		},
	}
}

// imagePullResult is `image pull`'s JSON.
type imagePullResult struct {
	Ref             string  `json:"ref"`
	Digest          string  `json:"digest"`
	Platform        string  `json:"platform"`
	Cached          bool    `json:"cached"`
	Layers          int     `json:"layers"`
	CompressedBytes int64   `json:"compressed_bytes"`
	UnpackedBytes   int64   `json:"unpacked_bytes"`
	Seconds         float64 `json:"seconds"`
	Rootfs          string  `json:"rootfs"`
}

func imagePullCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "pull REF@sha256:…",
		Short: "Pull, verify and unpack an image into this home's provider image cache",
		Long: `Pull an image by digest into the cache the provider agent of this --home
uses (HOME/provider/oci/images), as a job would: every digest checked,
layers unpacked with whiteouts applied. Jobs using the image then start
without waiting for the pull.`,
		Args: exactArgs("REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := oci.ParseRef(args[0]); err != nil {
				return usageError{err}
			}
			s, err := oci.NewStore(filepath.Join(e.home, "provider", "oci", "images"), oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{})
			if err != nil {
				return err
			}
			defer s.Close()
			img, pull, err := s.Get(cmd.Context(), args[0])
			var pe *oci.PullError
			if errors.As(err, &pe) && pe.Err != nil {
				// One's own pull: what the registry said is one's own
				// to read.
				return fmt.Errorf("%w: %v", err, pe.Err)
			}
			if err != nil {
				return err
			}
			img.Release()
			r := imagePullResult{
				Ref: img.Ref, Digest: img.Digest, Platform: img.Platform, Cached: pull.Cached, Layers: img.Layers,
				CompressedBytes: img.CompressedBytes, UnpackedBytes: img.UnpackedBytes, Seconds: pull.Duration.Seconds(), Rootfs: img.Rootfs,
			}
			return e.print(r, func(w io.Writer) {
				how := fmt.Sprintf("pulled in %.2fs", r.Seconds)
				if r.Cached {
					how = "already cached"
				}
				fmt.Fprintf(w, "%s (%s): %s; %d layers, %s downloaded, %s unpacked into %s\n", r.Digest, r.Platform, how, r.Layers,
					sandbox.FormatBytes(uint64(r.CompressedBytes)), sandbox.FormatBytes(uint64(r.UnpackedBytes)), r.Rootfs)
			})
		},
	}
}
