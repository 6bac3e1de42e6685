// train trains tinylm's model from its corpus and writes the tables the
// server embeds (go generate in examples/tinylm/model runs it):
//
//	go run ./train -corpus corpus.txt -out tables.bin.gz
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/gpunet/gpunet/examples/tinylm/model"
)

func main() {
	corpus := flag.String("corpus", "corpus.txt", "the training text: a paragraph a line")
	out := flag.String("out", "tables.bin.gz", "where to write the gzipped tables")
	flag.Parse()
	text, err := os.ReadFile(*corpus)
	if err != nil {
		log.Fatalf("train: %v", err)
	}
	m := model.Train(string(text))
	var b bytes.Buffer
	if err := m.WriteGzip(&b); err != nil {
		log.Fatalf("train: %v", err)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatalf("train: %v", err)
	}
	fmt.Fprintf(os.Stderr, "%s: %d tokens in the vocabulary, %d bytes (%s)\n", *out, m.VocabSize(), b.Len(), m.Fingerprint())
}
