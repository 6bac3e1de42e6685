// Command gpunet is the single binary of the gpunet network: node, devnet,
// provider agent and client.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpunet/gpunet/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
