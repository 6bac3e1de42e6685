package testnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goccy/go-yaml"
)

// The ports every node listens on, at its host's address.
const (
	APIPort = "26680"
	P2PPort = "26656"
	RPCPort = "26657"
)

// ClusterOptions describe a gpunet network on a Net. Zero fields take the
// defaults.
type ClusterOptions struct {
	Net Options
	// Bin is the gpunet binary the hosts run (required).
	Bin string
	// Dir receives the homes (Dir/net/node0 …, Dir/net/full0 …) and each
	// node's log (Dir/logs/NAME.log). Required.
	Dir string
	// Validators (default 4) and FullNodes (default 0) are the nodes;
	// their hosts are named node0 … and full0 ….
	Validators, FullNodes int
	// Hosts are more hosts, without a node (a provider, a consumer).
	Hosts []string
	// ChainID (default "testnet") and BlockTime (default 1s) go to
	// `gpunet init`, with InitArgs (e.g. --account ADDR=AMOUNT).
	ChainID   string
	BlockTime time.Duration
	InitArgs  []string
	// InitHomes, when set, writes the validators' homes under dir instead
	// of `gpunet init` (a benchmark with its own genesis) and returns
	// them, each config as init writes it.
	InitHomes func(dir string) ([]string, error)
	// Env is the environment of every process (nil: this one's).
	Env []string
	// StartTimeout bounds the wait for each node's API (default 90s).
	StartTimeout time.Duration
}

// Cluster is a gpunet network on a Net: validators and full nodes, each on
// its own host, and hosts for the rest.
type Cluster struct {
	*Net
	Nodes   []*Node
	ChainID string
	o       ClusterOptions
}

// Node is a gpunet node on its host.
type Node struct {
	Name string
	Host *Host
	// Home is the node's home directory.
	Home string
	// API is the node's API URL (http://10.77.0.X:26680), which it also
	// advertises to the others.
	API string
	// Validator is false for a full node.
	Validator bool
	// Log is the file the node's stdout and stderr go to.
	Log string

	c    *Cluster
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Up builds a cluster: the net and its hosts, the homes (written by
// `gpunet init --validators N` and then pointed at the hosts' addresses),
// and a running `gpunet node` on each node's host, its API answering. On
// error everything made so far is removed, and the error says why (a
// failed `gpunet init` with its output).
func Up(ctx context.Context, o ClusterOptions) (_ *Cluster, err error) {
	if o.Bin == "" || o.Dir == "" {
		return nil, errors.New("testnet: ClusterOptions.Bin and Dir are required")
	}
	if o.Validators == 0 {
		o.Validators = 4
	}
	if o.ChainID == "" {
		o.ChainID = "testnet"
	}
	if o.BlockTime == 0 {
		o.BlockTime = time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	if o.Validators < 1 || o.Validators > 64 || o.FullNodes < 0 || o.FullNodes > 64 {
		return nil, fmt.Errorf("testnet: %d validators and %d full nodes: want 1–64 and 0–64", o.Validators, o.FullNodes)
	}
	if _, err := Sweep(); err != nil {
		return nil, err
	}
	n, err := New(o.Net)
	if err != nil {
		return nil, err
	}
	// c, not the named result: `return nil, err` sets the result before
	// this deferred cleanup runs.
	c := &Cluster{Net: n, ChainID: o.ChainID, o: o}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.writeHomes(ctx); err != nil {
		return nil, err
	}
	for _, name := range o.Hosts {
		if _, err := n.AddHost(ctx, name); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, nd := range c.Nodes {
		wg.Go(func() { errs[i] = nd.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// writeHomes adds a host per node and writes the nodes' homes.
func (c *Cluster) writeHomes(ctx context.Context) error {
	o := c.o
	netDir := filepath.Join(o.Dir, "net")
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o700); err != nil {
		return err
	}
	args := append([]string{"init", "--validators", fmt.Sprint(o.Validators), "--home", netDir, "--chain-id", o.ChainID,
		"--block-time", o.BlockTime.String(), "--output", "json"}, o.InitArgs...)
	var out struct {
		Homes []string `json:"homes"`
	}
	if o.InitHomes != nil {
		homes, err := o.InitHomes(netDir)
		if err != nil {
			return err
		}
		out.Homes = homes
	} else if err := c.runJSON(ctx, &out, args...); err != nil {
		return err
	}
	if o.Validators == 1 && o.InitHomes == nil {
		// init writes one validator into --home itself.
		out.Homes = []string{netDir}
	}
	if len(out.Homes) != o.Validators {
		return fmt.Errorf("gpunet init wrote %d homes, want %d", len(out.Homes), o.Validators)
	}
	for i, home := range out.Homes {
		if err := c.addNode(ctx, fmt.Sprintf("node%d", i), home, true); err != nil {
			return err
		}
	}
	// A full node's home: its own keys from a one-validator init, then the
	// network's genesis in place of the one init wrote (its key is in no
	// validator set, so it follows the chain without signing).
	genesis, err := os.ReadFile(filepath.Join(out.Homes[0], "config", "genesis.json"))
	if err != nil {
		return err
	}
	for i := range o.FullNodes {
		name := fmt.Sprintf("full%d", i)
		home := filepath.Join(netDir, name)
		if err := c.runJSON(ctx, nil, "init", "--home", home, "--chain-id", o.ChainID, "--block-time", o.BlockTime.String(), "--output", "json"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(home, "config", "genesis.json"), genesis, 0o600); err != nil {
			return err
		}
		if err := c.addNode(ctx, name, home, false); err != nil {
			return err
		}
	}
	return c.rewriteConfigs()
}

func (c *Cluster) addNode(ctx context.Context, name, home string, validator bool) error {
	h, err := c.AddHost(ctx, name)
	if err != nil {
		return err
	}
	c.Nodes = append(c.Nodes, &Node{
		Name: name, Host: h, Home: home, Validator: validator, c: c,
		API: "http://" + net.JoinHostPort(h.Addr.String(), APIPort),
		Log: filepath.Join(c.o.Dir, "logs", name+".log"),
	})
	return nil
}

// rewriteConfigs points each home's config/gpunet.yaml at its host's
// address: moniker the host's name, api, p2p and rpc on its address, the validators as persistent peers (a
// node's id kept from what init wrote), advertise_api its API URL and
// peer_apis the other nodes'. Every other setting stays as init wrote it.
func (c *Cluster) rewriteConfigs() error {
	cfgs := make([]yaml.MapSlice, len(c.Nodes))
	ids := map[string]string{} // init's p2p address → node id
	for i, nd := range c.Nodes {
		b, err := os.ReadFile(filepath.Join(nd.Home, "config", "gpunet.yaml"))
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalWithOptions(b, &cfgs[i], yaml.UseOrderedMap()); err != nil {
			return fmt.Errorf("%s: %w", nd.Home, err)
		}
		for _, p := range stringsOf(get(cfgs[i], "persistent_peers")) {
			if id, addr, ok := strings.Cut(p, "@"); ok {
				ids[addr] = id
			}
		}
	}
	var peers []string
	for i, nd := range c.Nodes {
		if !nd.Validator {
			continue
		}
		old, _ := get(cfgs[i], "p2p").(string)
		id, ok := ids[old]
		if !ok {
			return fmt.Errorf("%s: no other validator names p2p %s as a peer", nd.Home, old)
		}
		peers = append(peers, id+"@"+net.JoinHostPort(nd.Host.Addr.String(), P2PPort))
	}
	for i, nd := range c.Nodes {
		a := nd.Host.Addr.String()
		var myPeers, peerAPIs []string
		for j, other := range c.Nodes {
			if j == i {
				continue
			}
			peerAPIs = append(peerAPIs, other.API)
		}
		for _, p := range peers {
			if !strings.HasSuffix(p, "@"+net.JoinHostPort(a, P2PPort)) {
				myPeers = append(myPeers, p)
			}
		}
		cfg := cfgs[i]
		cfg = set(cfg, "moniker", nd.Name)
		cfg = set(cfg, "api", net.JoinHostPort(a, APIPort))
		cfg = set(cfg, "p2p", net.JoinHostPort(a, P2PPort))
		cfg = set(cfg, "rpc", net.JoinHostPort(a, RPCPort))
		cfg = set(cfg, "persistent_peers", myPeers)
		cfg = set(cfg, "advertise_api", nd.API)
		cfg = set(cfg, "peer_apis", peerAPIs)
		b, err := yaml.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(nd.Home, "config", "gpunet.yaml"), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func get(m yaml.MapSlice, key string) any {
	for _, it := range m {
		if it.Key == key {
			return it.Value
		}
	}
	return nil
}

func set(m yaml.MapSlice, key string, v any) yaml.MapSlice {
	for i, it := range m {
		if it.Key == key {
			m[i].Value = v
			return m
		}
	}
	return append(m, yaml.MapItem{Key: key, Value: v})
}

func stringsOf(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// runJSON runs gpunet in this namespace (init touches only files) and
// decodes its stdout into v, if set.
func (c *Cluster) runJSON(ctx context.Context, v any, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.o.Bin, args...)
	cmd.Env = c.o.Env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("gpunet %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			return fmt.Errorf("gpunet %s printed %q: %w", strings.Join(args, " "), out, err)
		}
	}
	return nil
}

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Command runs the gpunet binary with args on host, with the cluster's
// environment.
func (c *Cluster) Command(ctx context.Context, host *Host, args ...string) *exec.Cmd {
	cmd := host.Command(ctx, c.o.Bin, args...)
	cmd.Env = c.o.Env
	return cmd
}

// Start runs `gpunet node --home HOME` on the node's host, its output
// appended to Log, and returns once its API answers (or the node exits, or
// StartTimeout passes).
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.done != nil {
		select {
		case <-n.done:
		default:
			n.mu.Unlock()
			return fmt.Errorf("%s is running", n.Name)
		}
	}
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	fmt.Fprintf(log, "--- %s: gpunet node --home %s on %s (%s)\n", time.Now().Format(time.RFC3339Nano), n.Home, n.Host.NS, n.Host.Addr)
	// Not tied to ctx: the node runs until Kill or the cluster's Close.
	cmd := n.c.Command(context.Background(), n.Host, "node", "--home", n.Home)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		n.mu.Unlock()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()

	ctx, cancel := context.WithTimeout(ctx, n.c.o.StartTimeout)
	defer cancel()
	hc := n.Host.HTTPClient()
	defer hc.CloseIdleConnections()
	for {
		if _, err := n.status(ctx, hc); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before its API answered (see %s)", n.Name, n.Log)
		case <-ctx.Done():
			return fmt.Errorf("%s: API %s did not answer: %w (see %s)", n.Name, n.API, ctx.Err(), n.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill stops the node with SIGKILL and waits for it to be gone.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// Status is the part of a node's /v1/status the harness reads.
type Status struct {
	ChainID    string `json:"chain_id"`
	Height     int64  `json:"height"`
	AppHash    string `json:"app_hash"`
	CatchingUp bool   `json:"catching_up"`
}

// Status asks the node's API for its status, from the node's own host.
func (n *Node) Status(ctx context.Context) (*Status, error) {
	hc := n.Host.HTTPClient()
	defer hc.CloseIdleConnections()
	return n.status(ctx, hc)
}

func (n *Node) status(ctx context.Context, hc *http.Client) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.API+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", n.API, resp.StatusCode, b)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s/v1/status: %w", n.API, err)
	}
	return &s, nil
}
