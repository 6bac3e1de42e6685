package count_test

import (
	"strings"
	"testing"

	"github.com/gpunet/gpunet/examples/wordcount/count"
)

func TestCounts(t *testing.T) {
	tests := []struct {
		name   string
		inputs []string
		want   string
	}{
		{"empty", []string{""}, "files 1\nlines 0\nwords 0\nbytes 0\ntop words:\n"},
		{"like wc", []string{"a b\n  c\td\n"}, "files 1\nlines 2\nwords 4\nbytes 10\ntop words:\n      1 a\n      1 b\n      1 c\n      1 d\n"},
		{"normalised, ties alphabetical", []string{"The cat. the Dog, \"the\" dog!", "-- cat"},
			"files 2\nlines 0\nwords 8\nbytes 34\ntop words:\n      3 the\n      2 cat\n      2 dog\n"},
		{"unicode", []string{"Grüße grüße\u00a0ÉTÉ"}, "files 1\nlines 0\nwords 3\nbytes 22\ntop words:\n      2 grüße\n      1 été\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c count.Counts
			for _, in := range tc.inputs {
				if err := c.Add(strings.NewReader(in)); err != nil {
					t.Fatal(err)
				}
			}
			var b strings.Builder
			c.Report(&b)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestTopTen(t *testing.T) {
	var c count.Counts
	c.Add(strings.NewReader(strings.Repeat("w ", 5) + "a b c d e f g h i j k l"))
	top := c.Top(10)
	if len(top) != 10 || top[0] != (count.Word{Word: "w", Count: 5}) || top[1].Word != "a" || top[9].Word != "i" {
		t.Errorf("Top(10) = %v", top)
	}
}
