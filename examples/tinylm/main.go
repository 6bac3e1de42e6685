// tinylm is the services example: a tiny language model, trained in this
// repository (examples/tinylm/model), served with OpenAI's chat
// completions API (examples/tinylm/server).
//
//	go run ./examples/tinylm -addr :8000
//	curl localhost:8000/v1/chat/completions -d '{"model":"tinylm","messages":[{"role":"user","content":"Is not Fire a Body?"}]}'
//
// With -prompt it prints one completion and exits instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
)

func main() {
	addr := flag.String("addr", ":8000", "where to serve the API")
	delay := flag.Duration("token-delay", 0, "wait this long before each token (a slower model, for demos and benchmarks)")
	prompt := flag.String("prompt", "", "print a completion of this text and exit, serving nothing")
	seed := flag.Uint64("seed", 0, "with -prompt: the sampling seed")
	temperature := flag.Float64("temperature", 1, "with -prompt: the sampling temperature (0: always the likeliest token)")
	maxTokens := flag.Int("max-tokens", model.DefaultMaxTokens, "with -prompt: the most tokens to generate")
	flag.Parse()
	m := model.Default()
	if *prompt != "" {
		g := m.Generate(m.Tokenize(*prompt), model.Options{Temperature: *temperature, Seed: *seed, MaxTokens: *maxTokens})
		fmt.Println(g.Run())
		return
	}
	// In a container this is process 1: it stops on SIGTERM by itself.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *addr, Handler: server.New(m, server.Options{TokenDelay: *delay}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		// The answers under way get a few seconds to end.
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	log.Printf("tinylm (%s, %d tokens) serving OpenAI's chat completions on %s", m.Fingerprint(), m.VocabSize(), *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("tinylm: %v", err)
	}
	<-done
}
