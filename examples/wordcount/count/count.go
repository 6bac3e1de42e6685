// Package count is the kernel of the wordcount example: it counts lines,
// words and bytes the way wc does and tallies word frequencies. It is a
// package of its own so that the same code runs natively and as the
// example's WebAssembly module.
package count

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
)

// Counts accumulates over one or more inputs.
type Counts struct {
	Lines, Words, Bytes int64
	Files               int
	freq                map[string]int64
}

// Add reads r to the end and adds what it holds. Lines are newline
// characters, words are runs of non-space runes (as in wc); for the
// frequency table words are lower-cased and stripped of leading and
// trailing punctuation.
func (c *Counts) Add(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if c.freq == nil {
		c.freq = make(map[string]int64)
	}
	c.Files++
	c.Bytes += int64(len(data))
	c.Lines += int64(bytes.Count(data, []byte{'\n'}))
	for _, f := range bytes.Fields(data) {
		c.Words++
		w := strings.TrimFunc(strings.ToLower(string(f)), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		})
		if w != "" {
			c.freq[w]++
		}
	}
	return nil
}

// Word is one entry of the frequency table.
type Word struct {
	Word  string
	Count int64
}

// Top returns the n most frequent words, most frequent first, ties in
// alphabetical order, so that the result does not depend on map order.
func (c *Counts) Top(n int) []Word {
	words := make([]Word, 0, len(c.freq))
	for w, k := range c.freq {
		words = append(words, Word{w, k})
	}
	sort.Slice(words, func(i, j int) bool {
		if words[i].Count != words[j].Count {
			return words[i].Count > words[j].Count
		}
		return words[i].Word < words[j].Word
	})
	return words[:min(n, len(words))]
}

// Report writes the counts and the ten most frequent words.
func (c *Counts) Report(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "files %d\nlines %d\nwords %d\nbytes %d\ntop words:\n", c.Files, c.Lines, c.Words, c.Bytes)
	for _, t := range c.Top(10) {
		fmt.Fprintf(&b, "%7d %s\n", t.Count, t.Word)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the one line the example prints to stdout.
func (c *Counts) Summary() string {
	return fmt.Sprintf("wordcount: %d lines, %d words, %d bytes in %d file(s)", c.Lines, c.Words, c.Bytes, c.Files)
}
