package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsChatScript: the Node.js script README.md shows is
// chat.mjs (after its first comment line), which README's commands run.
func TestREADMEShowsChatScript(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("chat.mjs")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "\n```js\n")
	block, _, ok2 := strings.Cut(block, "\n```\n")
	_, want, _ := strings.Cut(string(script), "\n")
	if !ok || !ok2 || block+"\n" != want {
		t.Errorf("README.md's js block:\n%s\nis not chat.mjs without its first line:\n%s", block, want)
	}
}
