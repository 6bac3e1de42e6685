package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/devicegemm"
	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/internal/gpu"
)

// int8Server serves the int8 model computing with g, its clock fixed.
func int8Server(t *testing.T, g model.GEMM) string {
	t.Helper()
	m, err := model.DefaultInt8(g)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(m, Options{Name: "tinylm-int8", Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var completionIDs = regexp.MustCompile(`chatcmpl-[0-9a-f]{24}`)

// TestInt8SameBytesOnEveryGEMM: the same requests, streamed and not, to
// two servers of the int8 model, one computing on the CPU and one on the
// (emulated) GPU's tensor-core kernel path, get the same response bytes
// (the completion's random id aside), which are not the trigram model's.
func TestInt8SameBytesOnEveryGEMM(t *testing.T) {
	cpu := int8Server(t, model.CPU{Workers: 2})
	dev := int8Server(t, devicegemm.Device{Dev: &gpu.Emulated{Name: "H100"}})
	for i, req := range []string{
		`"messages":[` + question + `],"temperature":0,"max_tokens":30`,
		`"messages":[` + question + `],"seed":7,"max_tokens":40`,
		`"messages":[{"role":"user","content":"And"}],"temperature":1.2,"top_p":0.8,"seed":1`,
		`"messages":[{"role":"user","content":"Do not the Rays"}],"temperature":0.8,"stop":[" of"],"stream":true,"stream_options":{"include_usage":true}`,
		`"messages":[{"role":"user","content":"light"}],"seed":3,"stream":true`,
	} {
		body := `{"model":"tinylm-int8",` + req + `}`
		var answers []string
		for _, url := range []string{cpu, dev} {
			resp := post(t, url, body)
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d: %s %s %v", i, resp.Status, b, err)
			}
			answers = append(answers, completionIDs.ReplaceAllString(string(b), "chatcmpl-ID"))
		}
		if answers[0] != answers[1] {
			t.Errorf("request %d: the CPU answered\n%s\nthe GPU\n%s", i, answers[0], answers[1])
		}
		if !strings.Contains(answers[0], `"model":"tinylm-int8"`) || !strings.Contains(answers[0], `"system_fingerprint":"tinylm-int8_`) {
			t.Errorf("request %d: %s", i, answers[0])
		}
	}
	if resp := post(t, cpu, `{"model":"tinylm","messages":[`+question+`]}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the int8 server asked for the trigram model: %s", resp.Status)
	}
}

// failing is a GEMM whose products fail, as a lost GPU's would.
type failing struct{ model.GEMM }

func (f failing) Weights(wt []int8, out, in int) (model.Weights, error) {
	w, err := f.GEMM.Weights(wt, out, in)
	return failingWeights{w}, err
}

type failingWeights struct{ model.Weights }

func (failingWeights) Mul([]int32, []int8, int) error { return errors.New("device lost") }

// TestInt8GEMMFailure: a model whose GEMM fails answers 500, not a
// completion cut short as if it were whole.
func TestInt8GEMMFailure(t *testing.T) {
	url := int8Server(t, failing{model.CPU{}})
	resp := post(t, url, `{"model":"tinylm-int8","messages":[`+question+`]}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "device lost") {
		t.Errorf("%s %s", resp.Status, b)
	}
	resp = post(t, url, `{"model":"tinylm-int8","stream":true,"messages":[`+question+`]}`)
	b, _ = io.ReadAll(resp.Body)
	if strings.Contains(string(b), "finish_reason\":\"") || strings.Contains(string(b), "[DONE]") {
		t.Errorf("a failed stream ended as a whole answer: %s", b)
	}
}
