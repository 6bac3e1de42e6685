// train8 trains tinylm's int8 model from its corpus and writes the weights
// the server embeds (go generate in examples/tinylm/model runs it):
//
//	go run ./train8 -corpus corpus.txt -out int8.bin.gz
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
)

func main() {
	corpus := flag.String("corpus", "corpus.txt", "the training text: a paragraph a line")
	out := flag.String("out", "int8.bin.gz", "where to write the gzipped weights")
	flag.Parse()
	text, err := os.ReadFile(*corpus)
	if err != nil {
		log.Fatalf("train8: %v", err)
	}
	t0 := time.Now()
	w := model.TrainInt8(string(text), model.DefaultInt8Shape)
	var b bytes.Buffer
	if err := w.WriteGzip(&b); err != nil {
		log.Fatalf("train8: %v", err)
	}
	m, err := model.NewInt8(w, model.CPU{})
	if err != nil {
		log.Fatalf("train8: the quantized weights: %v", err)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatalf("train8: %v", err)
	}
	fmt.Fprintf(os.Stderr, "%s: %d tokens, %d bytes (%s), trained in %.1f s\n", *out, m.VocabSize(), b.Len(), m.Fingerprint(), time.Since(t0).Seconds())
}
