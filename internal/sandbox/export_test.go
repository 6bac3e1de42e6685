package sandbox

import "testing"

// SetMaxOutputEntries lowers the output entry cap for one test, so that it
// need not write 100,000 files to reach it.
func SetMaxOutputEntries(t testing.TB, n int) {
	old := maxOutputEntries
	maxOutputEntries = n
	t.Cleanup(func() { maxOutputEntries = old })
}

// SetLinkOutputs turns hard-linking outputs on or off for one test.
func SetLinkOutputs(t testing.TB, on bool) {
	old := linkOutputs
	linkOutputs = on
	t.Cleanup(func() { linkOutputs = old })
}
