package jobbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// network is the devnet the jobs run on, and the consumers that send them.
type network struct {
	clock   *blockClock
	clients []*jobclient.Client
	spec    *jobspec.Spec
	// stop stops the providers, then the node.
	stop func() error
}

// startNetwork sets up a devnet home, starts its node and provider agents,
// waits out the providers' first hardware challenges, and funds a consumer
// per concurrent submitter.
func startNetwork(ctx context.Context, home string, o Options, progress func(string, ...any)) (_ *network, err error) {
	if _, err := devnet.Setup(home, devnet.Options{BlockTime: o.BlockTime}); err != nil {
		return nil, err
	}
	d, err := daemon.Start(ctx, home, daemon.Options{APIAddr: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	n := &network{stop: d.Stop}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.stop())
		}
	}()
	heights, err := d.Node.Subscribe(ctx, "gpunet-bench-jobs")
	if err != nil {
		return nil, err
	}
	n.clock = newBlockClock(heights)

	pctx, stopProviders := context.WithCancel(ctx)
	ps, err := devnet.RunProviders(pctx, home, d.APIURL, devnet.ProviderOptions{N: o.Providers, Poll: o.Poll})
	if err != nil {
		stopProviders()
		return nil, err
	}
	n.stop = func() error {
		stopProviders()
		return errors.Join(append(ps.Wait(), d.Stop())...)
	}
	if err := ps.WaitReady(ctx, time.Minute); err != nil {
		return nil, err
	}

	cl := chainclient.New(d.APIURL)
	progress("waiting for the providers' first hardware challenges to end…")
	if err := waitFirstChallenges(ctx, cl, ps); err != nil {
		return nil, err
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return nil, err
	}
	consumers, err := fundConsumers(ctx, cl, kr, max(o.Concurrency, 1))
	if err != nil {
		return nil, err
	}
	specDir := filepath.Join(home, "bench-job")
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		return nil, err
	}
	if n.spec, err = noopSpec(specDir, o.Verification); err != nil {
		return nil, err
	}
	n.clients = make([]*jobclient.Client, len(consumers))
	for i, k := range consumers {
		n.clients[i] = jobclient.New(cl, k, home, devnet.ChainID)
	}
	return n, nil
}

// waitFirstChallenges waits, for two minutes at most, until the ledger has
// ruled on every provider's first hardware challenge (passed, late, missed
// or failed). Each new provider gets
// one within its first blocks, a GEMM that keeps a core busy for seconds;
// a provider is challenged again only minutes later. Jobs are measured
// after the first ones are done.
func waitFirstChallenges(ctx context.Context, cl *chainclient.Client, ps *devnet.Providers) error {
	settle := time.Now().Add(2 * time.Minute)
	for open := true; open && time.Now().Before(settle); {
		open = false
		for _, a := range ps.Agents {
			p, err := cl.Provider(ctx, a.Status().Key())
			if err != nil {
				return err
			}
			ch := p.Record.Challenges
			open = open || p.Record.HWChallenge != nil || ch.Passed+ch.Late+ch.Missed+ch.Failed == 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// fundConsumers adds n consumer keys to the keyring and funds them from
// alice in one block.
func fundConsumers(ctx context.Context, cl *chainclient.Client, kr *keys.Keyring, n int) ([]*keys.Key, error) {
	alice, err := kr.Get(devnet.DevKeys[0])
	if err != nil {
		return nil, err
	}
	acct, err := cl.Account(ctx, alice.Address)
	if err != nil {
		return nil, err
	}
	const funding = 1_000 * 1_000_000 // 1,000 SYNC: a no-op job escrows under 0.01
	var out []*keys.Key
	for i := range n {
		name := "bench-consumer-" + strconv.Itoa(i)
		k, err := kr.Get(name)
		if errors.Is(err, keys.ErrNotFound) {
			k, err = kr.Add(name)
		}
		if err != nil {
			return nil, err
		}
		tx := &ledger.Tx{ChainID: devnet.ChainID, Sequence: acct.NextSequence + uint64(i), Msg: &ledger.MsgSend{To: k.Address, Amount: funding}}
		if err := tx.Sign(alice.PrivateKey()); err != nil {
			return nil, err
		}
		raw, err := tx.Encode()
		if err != nil {
			return nil, err
		}
		if _, err := cl.BroadcastTx(ctx, raw, false); err != nil {
			return nil, fmt.Errorf("fund %s: %w", name, err)
		}
		out = append(out, k)
	}
	for _, k := range out {
		for {
			b, err := cl.Balance(ctx, k.Address)
			if err == nil && b.Balance >= funding {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return out, nil
}
