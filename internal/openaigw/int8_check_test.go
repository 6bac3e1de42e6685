package openaigw

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/examples/tinylm/devicegemm"
	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/gpu/kernels"
	"github.com/gpunet/gpunet/internal/ledger"
)

// int8Gateway is a gateway over rr's replicas of a service of model
// tinylm-int8 declared exact, checking every deterministic request, and
// the disputes it files.
func int8Gateway(t *testing.T, rr *receiptReplicas) (*Gateway, string, func() []*ledger.MsgServiceDispute) {
	return checkGatewayFor(t, rr, "tinylm-int8", checkChain, 1_000_000, func(svc *ledger.Service, _ *CheckOptions) {
		svc.Spec.OpenAI.Exact = true
	})
}

// TestChecksInt8ExactAcrossGEMMs: tinylm's int8 network served by
// replicas that compute its products differently (int8gemm on the CPU on
// one goroutine, on four, and the GPU code path under a tensor-core
// kernel on the emulated device) agrees on every checked request, byte for
// byte, so no honest replica is ever disputed; a fourth replica serving
// the same network with its output layer kept to 4 bits (a cheaper model
// than the one paid for) is the odd one in every check it takes part in,
// and every dispute names it.
func TestChecksInt8ExactAcrossGEMMs(t *testing.T) {
	int8Server := func(w *model.Int8Weights, g model.GEMM) (http.Handler, *model.Int8) {
		m, err := model.NewInt8(w, g)
		if err != nil {
			t.Fatal(err)
		}
		return server.New(m, server.Options{Name: "tinylm-int8"}), m
	}
	ref, err := model.DefaultInt8(model.CPU{})
	if err != nil {
		t.Fatal(err)
	}
	weights := ref.Weights()
	coarse := ref.Weights()
	for i, v := range coarse.W2 {
		coarse.W2[i] = v >> 4 << 4
	}
	one, _ := int8Server(weights, model.CPU{Workers: 1})
	four, _ := int8Server(weights, model.CPU{Workers: 4})
	dev, _ := int8Server(weights, devicegemm.Device{Dev: &gpu.Emulated{Name: "H100"}, Kernel: kernels.TensorCoreKernels[0]})
	cheat, cheap := int8Server(coarse, model.CPU{})
	rr := newReceiptReplicasOf(t, []http.Handler{one, four, dev, cheat})
	faulty := rr.provs[3]
	g, url, disputes := int8Gateway(t, rr)

	prompts := []string{"Is not Fire a Body", "Do not the Rays of Light", "And are not", "the Sun", "Vibrations of the Medium", "Water"}
	const n = 12
	for i := range n {
		p := prompts[i%len(prompts)]
		// A request whose answer from the cheap model differs (one that
		// could not catch it is of no use here): the first such seed, or
		// greedy decoding every third request.
		var o model.Options
		var req string
		for seed := uint64(10 * i); ; seed++ {
			o = model.Options{Seed: seed, Temperature: 0.8, MaxTokens: 12}
			req = fmt.Sprintf(`"seed":%d,"temperature":0.8,"max_tokens":12`, seed)
			if i%3 == 0 {
				o, req = model.Options{MaxTokens: 12}, `"temperature":0,"max_tokens":12`
			}
			a, b := ref.Generate(ref.Tokenize(p), o).Run(), cheap.Generate(cheap.Tokenize(p), o).Run()
			if a != b {
				break
			}
			if i%3 == 0 || seed == uint64(10*i+9) {
				t.Fatalf("request %d: the 4-bit model answers %q too", i, a)
			}
		}
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true,"stream_options":{"include_usage":true}`
		}
		ask(t, url, fmt.Sprintf(`{"model":"tinylm-int8","messages":[{"role":"user","content":%q}],%s%s}`, p, req, stream))
		waitChecks(t, g, i+1)
	}
	involved := 0
	for i, ch := range g.Checks() {
		has := slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == faulty })
		switch {
		case has && ch.Verdict != CheckDisputed:
			t.Errorf("check %d: the 4-bit replica took part and the verdict is %s (%s)", i, ch.Verdict, ch.Err)
		case !has && ch.Verdict != CheckAgreed:
			t.Errorf("check %d: two honest replicas computing differently, verdict %s (%s)", i, ch.Verdict, ch.Err)
		}
		if has {
			involved++
		}
	}
	ds := disputes()
	if len(ds) != involved {
		t.Errorf("%d disputes, %d checks involved the 4-bit replica", len(ds), involved)
	}
	if involved == 0 {
		t.Errorf("no check of %d involved the 4-bit replica", n)
	}
	for _, m := range ds {
		if err := m.ValidateBasic(); err != nil {
			t.Fatal(err)
		}
		odd := 0
		for _, r := range m.Receipts {
			if r.Provider == faulty {
				odd++
			}
		}
		if odd != 1 {
			t.Errorf("a dispute without the 4-bit replica: %+v", m.Receipts)
		}
	}
}
