package jobspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// yamlBlocks returns the ```yaml blocks of a Markdown file, unindented,
// with the line each starts on.
func yamlBlocks(t *testing.T, path string) (blocks []string, lines []int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cur []string
	indent, in, start := "", false, 0
	for i, l := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case !in && trimmed == "```yaml":
			in, indent, cur, start = true, l[:len(l)-len(trimmed)], nil, i+2
		case in && trimmed == "```":
			in = false
			blocks, lines = append(blocks, strings.Join(cur, "\n")+"\n"), append(lines, start)
		case in:
			cur = append(cur, strings.TrimPrefix(l, indent))
		}
	}
	return blocks, lines
}

// TestDocExamples checks the YAML in docs/jobspec.md: complete specs (those
// starting with name:) must parse, and fragments may lack required fields
// but must not have any other problem.
func TestDocExamples(t *testing.T) {
	blocks, lines := yamlBlocks(t, filepath.Join("..", "..", "docs", "jobspec.md"))
	if len(blocks) < 10 {
		t.Fatalf("found only %d yaml blocks in docs/jobspec.md", len(blocks))
	}
	complete := 0
	for i, b := range blocks {
		_, err := Parse([]byte(b), "")
		if strings.HasPrefix(b, "name:") {
			complete++
			if err != nil {
				t.Errorf("docs/jobspec.md:%d: example does not parse: %v", lines[i], err)
			}
			continue
		}
		es, _ := err.(Errors)
		for _, e := range es {
			if !strings.Contains(e.Msg, "is required") {
				t.Errorf("docs/jobspec.md:%d: fragment: %v", lines[i], e)
			}
		}
	}
	if complete < 3 {
		t.Errorf("found %d complete specs in docs/jobspec.md, want the wordcount, wasm and oci examples", complete)
	}
	if blocks[0] != designExample {
		t.Errorf("the first example in docs/jobspec.md is not DESIGN.md's:\n%s", blocks[0])
	}
}
