// tinylm is the services example: a tiny language model, trained in this
// repository (examples/tinylm/model), served with OpenAI's chat
// completions API (examples/tinylm/server).
//
//	go run ./examples/tinylm -addr :8000
//	curl localhost:8000/v1/chat/completions -d '{"model":"tinylm","messages":[{"role":"user","content":"Is not Fire a Body?"}]}'
//
// -model tinylm-int8 serves the int8 network instead of the trigram model
// (model.Int8): its matrix products run on the GPU's int8 kernels when
// there is one (-gemm auto or gpu), else on the CPU, with the same answers
// bit for bit.
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
	"runtime"
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
	name := flag.String("model", "tinylm", "the model to serve: tinylm (the trigram model) or tinylm-int8 (the int8 network)")
	gemm := flag.String("gemm", "auto", "with -model tinylm-int8: where its matrix products run: cpu, gpu (the first CUDA device) or auto (gpu when there is one)")
	workers := flag.Int("workers", min(runtime.NumCPU(), 4), "with -model tinylm-int8 on the CPU: goroutines per matrix product")
	flag.Parse()
	m, desc, err := open(*name, *gemm, *workers)
	if err != nil {
		log.Fatalf("tinylm: %v", err)
	}
	if *prompt != "" {
		g := m.Generate(m.Tokenize(*prompt), model.Options{Temperature: *temperature, Seed: *seed, MaxTokens: *maxTokens})
		fmt.Println(g.Run())
		if err := g.Err(); err != nil {
			log.Fatalf("tinylm: %v", err)
		}
		return
	}
	// In a container this is process 1: it stops on SIGTERM by itself.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *addr, Handler: server.New(m, server.Options{Name: *name, TokenDelay: *delay}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		// The answers under way get a few seconds to end.
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	log.Printf("%s (%s, %s) serving OpenAI's chat completions on %s", *name, m.Fingerprint(), desc, *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("tinylm: %v", err)
	}
	<-done
}

// served is a model the server serves.
type served interface {
	server.Model
	VocabSize() int
}

// open makes the model named name and says what it computes on.
func open(name, gemm string, workers int) (served, string, error) {
	switch name {
	case "tinylm":
		m := model.Default()
		return m, fmt.Sprintf("%d tokens", m.VocabSize()), nil
	case "tinylm-int8":
	default:
		return nil, "", fmt.Errorf("-model %q: want tinylm or tinylm-int8", name)
	}
	cpu, err := model.DefaultInt8(model.CPU{Workers: workers})
	if err != nil {
		return nil, "", err
	}
	switch gemm {
	case "cpu":
		return cpu, cpu.GEMM(), nil
	case "gpu", "auto":
	default:
		return nil, "", fmt.Errorf("-gemm %q: want cpu, gpu or auto", gemm)
	}
	m, desc, err := openGPU(cpu, gemm == "auto")
	if err != nil {
		return nil, "", fmt.Errorf("-gemm %s: %w", gemm, err)
	}
	return m, desc, nil
}
