package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestJoinFlags: --trust-height, --trust-hash and --witness go with
// --join, and the first two together; each misuse is a usage error that
// names the flags, before anything is asked or written.
func TestJoinFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "--trust-height", "5", "--trust-hash", strings.Repeat("ab", 32)}, "go with --join"},
		{[]string{"init", "--witness", "http://127.0.0.1:26657"}, "go with --join"},
		{[]string{"init", "--join", "http://127.0.0.1:1", "--trust-height", "5"}, "--trust-height and --trust-hash go together"},
		{[]string{"init", "--join", "http://127.0.0.1:1", "--trust-hash", strings.Repeat("ab", 32)}, "--trust-height and --trust-hash go together"},
	} {
		home := t.TempDir() + "/h"
		var out, errOut bytes.Buffer
		code := RunIO(t.Context(), append(tc.args, "--home", home), strings.NewReader(""), &out, &errOut)
		if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("gpunet %v: exit %d, stderr %q; want a usage error saying %q", tc.args, code, errOut.String(), tc.want)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("gpunet %v wrote %s", tc.args, home)
		}
	}
}
