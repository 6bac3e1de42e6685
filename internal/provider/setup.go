package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/egress"
	"github.com/gpunet/gpunet/internal/relay"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// Setting up an agent run from a gpunet home, as `gpunet provider start`
// and the devnet's providers are: its executors (OpenSandboxes), and the
// files and node it works with (NewInHome). Under home/provider:
//
//	NAME.json      the agent's Status (StatusFile)
//	NAME/jobs/     running jobs' files and pending reveals (Options.WorkDir)
//	wasm-cache/    the wasm executor's compilation cache
//	oci/           the container executor's images and bundles

// StatusFile is where the agent of key name run from home keeps its
// Status, which `gpunet provider status` reads (ReadStatus).
func StatusFile(home, name string) string {
	return filepath.Join(home, "provider", name+".json")
}

// NewInHome returns an agent whose files live in home and that talks to
// the node behind chain: o completed with chain, the node's blob gateway
// (reached through chain's transport, so that it follows chain from node
// to node when chain has several),
// the status file, the jobs' work directory, home as the disk it declares
// (unless o sets it), sb's executors and notes, and (unless o sets one) a
// relay link to chain's nodes for its service replicas.
func NewInHome(home string, chain *chainclient.Client, sb *SandboxSet, o Options) *Agent {
	o.Chain = chain
	o.Blobs = blob.NewClient(chain.Base())
	o.Blobs.HTTPClient = &http.Client{Transport: chain.Transport()}
	o.StatusFile = StatusFile(home, o.Key.Name)
	o.WorkDir = filepath.Join(home, "provider", o.Key.Name, "jobs")
	if o.DiskPath == "" {
		o.DiskPath = home
	}
	if sb != nil {
		o.Sandboxes, o.SandboxNotes = sb.Executors, sb.Notes
	}
	if o.Relay == nil {
		// One relay session, with one of the nodes the agent talks to,
		// signed for that node's URL and the chain (relaylink.go).
		nodes, key, logger := chain.Bases(), o.Key.PrivateKey(), o.Logger
		o.Relay = func(dial ReplicaDialer) RelayLink {
			return &relayLink{status: chain, o: relay.AgentOptions{Nodes: nodes, Key: key, Dial: dial, Log: logger}}
		}
	}
	return New(o)
}

// ReadStatus reads the Status that the agent of key name run from home
// last wrote. A missing file is an error wrapping os.ErrNotExist.
func ReadStatus(home, name string) (Status, error) {
	var st Status
	path := StatusFile(home, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// StatusNames returns the key names of the agents that have run from
// home (those with a status file).
func StatusNames(home string) []string {
	matches, _ := filepath.Glob(StatusFile(home, "*"))
	var names []string
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".json"))
	}
	return names
}

// SandboxOptions tune OpenSandboxes.
type SandboxOptions struct {
	// NoOCI leaves the container executor out.
	NoOCI bool
	// AllowNetwork lets oci jobs that ask for network access use the
	// host's network (`provider start --allow-network`).
	AllowNetwork bool
	// AllowFetchNetworks are networks images may be pulled from although
	// they are not public (loopback, private, link-local, this host's
	// own addresses: refused by default, as for URL inputs). They are
	// the agent's Options.AllowFetchNetworks (`provider start
	// --allow-fetch-network`): the registry an image names is a
	// stranger's choice as much as a URL input is, and either reaches the
	// provider's network the same way.
	AllowFetchNetworks []netip.Prefix
	// AllowRegistries are registries (address:port) images may be pulled
	// from although their address is not public: the devnet's own, and
	// nothing else on its address.
	AllowRegistries []netip.AddrPort
	// ImageCacheBytes bounds the oci executor's unpacked images
	// (`provider start --image-cache`; 0: oci.DefaultImageCacheBytes).
	ImageCacheBytes int64
	Logger          *slog.Logger
}

// SandboxSet is the executors a machine offers, opened.
type SandboxSet struct {
	// Executors are the executors offered, by name ("wasm", "oci").
	Executors map[string]sandbox.Executor
	// Notes are for the operator: what the oci executor enforces here
	// and its fallbacks, or why it is not offered.
	Notes []string
	// notOffered says why each known executor left out is not offered.
	notOffered map[string]string
	closers    []func() error
}

// OpenSandboxes opens the executors that agents run from home offer: wasm
// (built into gpunet, its compilation cache under home/provider), and oci
// when runc is installed and starts a trial container (images cached
// under home/provider/oci, pulled only from public addresses and the
// networks and registries o allows). Close them with Close.
func OpenSandboxes(ctx context.Context, home string, o SandboxOptions) (*SandboxSet, error) {
	dir := filepath.Join(home, "provider")
	w, err := wasm.New(filepath.Join(dir, "wasm-cache"))
	if err != nil {
		return nil, fmt.Errorf("wasm executor: %w", err)
	}
	s := &SandboxSet{Executors: map[string]sandbox.Executor{wasm.Name: w}, notOffered: map[string]string{}, closers: []func() error{w.Close}}
	if !o.NoOCI {
		c, err := oci.New(ctx, oci.Options{
			Dir: filepath.Join(dir, "oci"), Logger: o.Logger, AllowNetwork: o.AllowNetwork, ImageCacheBytes: o.ImageCacheBytes,
			// An image reference is a stranger's: its registry is dialled
			// only where a URL input's server would be.
			Registry: oci.RegistryOptions{Egress: &egress.Policy{Allow: o.AllowFetchNetworks, AllowEndpoints: o.AllowRegistries}},
		})
		if err != nil {
			s.notOffered[oci.Name] = err.Error()
			s.Notes = append(s.Notes, "oci: not offered: "+err.Error())
		} else {
			s.Executors[oci.Name] = c
			s.closers = append(s.closers, c.Close)
			for _, l := range c.Capabilities().Lines() {
				s.Notes = append(s.Notes, "oci: "+l)
			}
		}
	}
	return s, nil
}

// Close closes the executors.
func (s *SandboxSet) Close() {
	for _, c := range s.closers {
		c()
	}
	s.closers = nil
}

// NotOfferedError is an executor asked for that this machine does not
// offer.
type NotOfferedError struct {
	Executor string
	// Why is the executor's own reason ("" for a name no executor has).
	Why string
}

func (e *NotOfferedError) Error() string {
	if e.Why == "" {
		return fmt.Sprintf("executor %s is not offered here", e.Executor)
	}
	return fmt.Sprintf("executor %s is not offered here: %s", e.Executor, e.Why)
}

// Offers returns a *NotOfferedError for the first of names that s does
// not offer.
func (s *SandboxSet) Offers(names []string) error {
	for _, name := range names {
		if _, ok := s.Executors[name]; !ok {
			return &NotOfferedError{Executor: name, Why: s.notOffered[name]}
		}
	}
	return nil
}
