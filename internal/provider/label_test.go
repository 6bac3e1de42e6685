package provider_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestAgentDeclaresItsLabel: the agent registers with its label (issue
// 33, `provider start --label`), and a restart with another label
// updates the registration, as a changed region or price does.
func TestAgentDeclaresItsLabel(t *testing.T) {
	n := startNetwork(t, "p")
	label := func(l string) func(*provider.Options) { return func(o *provider.Options) { o.Label = l } }
	a, stop := runAgentWith(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 20_000, label("Acme GPUs"))
	waitFor(t, "registered", func() bool { return ready(a) })
	p, err := n.cl.Provider(t.Context(), a.Status().Key())
	if err != nil || p.Record.Label != "Acme GPUs" || p.Offer.Label != "Acme GPUs" {
		t.Fatalf("registered: %v, record label %q, offer label %q", err, p.Record.Label, p.Offer.Label)
	}
	stop()
	a, stop = runAgentWith(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 20_000, label("Acme GPUs (Berlin) #2"))
	defer stop()
	waitFor(t, "the label updated", func() bool {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		return err == nil && p.Record.Label == "Acme GPUs (Berlin) #2" && p.Record.Online
	})
}
