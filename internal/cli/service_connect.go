package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

func serviceConnectCmd(e *env) *cobra.Command {
	var port uint64
	var listen, key string
	connect := &cobra.Command{
		Use:   "connect ID --port P [--listen 127.0.0.1:8443] [--key sk-gpunet-…]",
		Short: "Forward a local TCP port to a port of a service, through the node: end-to-end TLS if the container terminates it",
		Long: `Listen on --listen and join each connection to port --port of a ready replica
of the service, through the node's relay (GET /svc/ID/PORT with Upgrade:
gpunet-tcp). The bytes pass unchanged: a container that terminates TLS itself
gets end-to-end TLS, and the relays see only ciphertext. The access key is the
one kept in HOME/services/ID.key (or --key); a public service needs none.
Runs until Ctrl-C.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return usageError{fmt.Errorf("--port %d: want the service's port, 1 to 65535", port)}
			}
			cl, svc, err := e.serviceArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			id := svc.ID
			if svc.Spec.Port(port) == nil {
				return usageError{fmt.Errorf("service %d declares no port %d (its ports: %s)", id, port, specPorts(svc.Spec.Ports))}
			}
			if svc.Done() {
				return fmt.Errorf("service %d is %s", id, svc.State)
			}
			if key, err = e.accessKey(svc, key); err != nil {
				return err
			}
			if listen == "" {
				listen = "127.0.0.1:" + strconv.FormatUint(port, 10)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stop := context.AfterFunc(ctx, func() { ln.Close() })
			defer stop()
			err = e.print(map[string]any{"service": id, "port": port, "listen": ln.Addr().String(), "node": cl.Base()}, func(w io.Writer) {
				fmt.Fprintf(w, "forwarding %s to service %d port %d through %s; Ctrl-C stops\n", ln.Addr(), id, port, cl.Base())
			})
			if err != nil {
				ln.Close()
				return err
			}
			return forward(ctx, ln, func(ctx context.Context) (io.ReadWriteCloser, error) {
				return cl.DialService(ctx, id, port, key)
			}, func(err error) { fmt.Fprintf(e.stderr, "service %d port %d: %v\n", id, port, err) })
		},
	}
	connect.Flags().Uint64Var(&port, "port", 0, "the service's port to reach (required)")
	connect.Flags().StringVar(&listen, "listen", "", "local address to listen on (default 127.0.0.1:PORT)")
	connect.Flags().StringVar(&key, "key", "", "the access key (default: the one kept in HOME/services/ID.key)")
	connect.MarkFlagRequired("port")
	return connect
}

// forward accepts connections on ln until ctx ends (or ln fails) and joins
// each to a stream from dial; problems with one connection go to report.
func forward(ctx context.Context, ln net.Listener, dial func(context.Context) (io.ReadWriteCloser, error), report func(error)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			remote, err := dial(ctx)
			if err != nil {
				report(err)
				return
			}
			defer remote.Close()
			stop := context.AfterFunc(ctx, func() { c.Close(); remote.Close() })
			defer stop()
			pipe(c, remote)
		}()
	}
}

// pipe copies both ways until one side ends, then closes its write half
// where it can, so the other side sees the end.
func pipe(local net.Conn, remote io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(remote, local)
		if cw, ok := remote.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
			remote.Close()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(local, remote)
		if tc, ok := local.(*net.TCPConn); ok {
			tc.CloseWrite()
		} else {
			local.Close()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// specPorts lists a spec's ports for a message: "8000/http, 22/tcp".
func specPorts(ps []ledger.ServicePort) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	}
	return s
}

// accessKey is the key to reach svc with: flag when given, none for a
// public service, else the one kept in HOME/services/ID.key.
func (e *env) accessKey(svc *ledger.Service, flag string) (string, error) {
	if flag != "" || svc.Public {
		return flag, nil
	}
	k, ok, err := e.loadServiceKey(svc.ID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("service %d is private and no access key of it is in %s: pass --key, or make one with %s", svc.ID, e.serviceKeyFile(svc.ID), hint(fmt.Sprintf("service access %d --new-key", svc.ID)))
	}
	return k, nil
}
