package apiwire_test

import (
	"encoding/hex"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// TestLogSignBytes pins the bytes a provider signs for a log chunk: nodes
// and providers of different versions must agree on them.
func TestLogSignBytes(t *testing.T) {
	got := hex.EncodeToString(apiwire.LogSignBytes(7, 3, []byte("hello")))
	want := hex.EncodeToString([]byte("gpunet/log/v1\x00")) +
		"0000000000000007" + "0000000000000003" +
		"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	if got != want {
		t.Errorf("LogSignBytes(7, 3, hello) = %s, want %s", got, want)
	}
}

// TestErrorCodesAreErrorStatuses: every stable code maps to a 4xx or 5xx.
func TestErrorCodesAreErrorStatuses(t *testing.T) {
	for code, status := range apiwire.ErrorCodes {
		if status < 400 || status > 599 {
			t.Errorf("ErrorCodes[%q] = %d, want an error status", code, status)
		}
	}
}
