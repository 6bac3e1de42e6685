package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDataAcrossNodes (issue 13): two validators, each its own `gpunet
// node`; a provider that talks only to node1 and a consumer that talks
// only to node0. The consumer's inputs are uploaded to node0 and the
// provider's outputs to node1: each gateway fetches what it lacks from the
// other. A job with an input file runs and its outputs are fetched through
// node0; its log reads on node0; a job with a URL-pinned input runs; one
// with a wrong sha256 is handed back with the reason; `gpunet storage`
// reports usage.
func TestDataAcrossNodes(t *testing.T) {
	parallel(t, weightLight)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice, carol keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &carol, "keys", "add", "carol", "--home", keyHome)
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "2", "--home", filepath.Join(root, "net"), "--chain-id", "e2e-data", "--block-time", "200ms",
		"--account", alice.Address+"=1000sync", "--account", carol.Address+"=100sync")
	apis := make([]string, 2)
	for i, h := range net.Homes {
		p := startProc(t, fmt.Sprintf("node%d", i), "node", "--home", h, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = info.API
	}
	node0, node1 := apis[0], apis[1]
	// The URL inputs below come from a test server on loopback, which a
	// provider refuses unless its operator allows it.
	startProc(t, "provider carol (node1 only)", "provider", "start", "--from", "carol", "--home", keyHome, "--node", node1, "--bench-time", "200ms", "--region", "eu", "--price", "0.05sync",
		"--allow-fetch-network", "127.0.0.0/8")
	waitOfferCount(t, 60*time.Second, keyHome, node0, "", 1)

	dir := t.TempDir()
	wasm, err := os.ReadFile("../../examples/wordcount/wordcount.wasm")
	if err != nil {
		t.Fatal(err)
	}
	input := []byte("the quick brown fox jumps over the lazy dog\nthe end\n")
	os.WriteFile(filepath.Join(dir, "wordcount.wasm"), wasm, 0o644)
	os.WriteFile(filepath.Join(dir, "input.txt"), input, 0o644)
	spec := func(name, inputs string) string {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte(`name: `+name+`
executor: wasm
module: ./wordcount.wasm
args: ["/in/input.txt"]
inputs:
`+inputs+`outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 1m
verification: none
`), 0o644)
		return p
	}

	// 1. Inputs uploaded to node0, run by a provider on node1, outputs
	// fetched through node0.
	out := filepath.Join(dir, "out1")
	r := gpunet(t, "job", "run", spec("local-input", "  - {path: /in/input.txt, from: ./input.txt}\n"), "--from", "alice", "--home", keyHome, "--node", node0, "--out", out)
	if r.code != 0 {
		t.Fatalf("job run across nodes: %v", r)
	}
	counts, err := os.ReadFile(filepath.Join(out, "out", "counts.txt"))
	if err != nil || !strings.Contains(string(counts), "the") {
		t.Fatalf("outputs fetched through node0: %q %v", counts, err)
	}
	var j1 struct {
		ID     uint64 `json:"id"`
		DataAt string `json:"data_at"`
	}
	gpunetJSON(t, &j1, "job", "status", "1", "--home", keyHome, "--node", node0)
	if j1.DataAt != "http://"+strings.TrimPrefix(node0, "http://") {
		t.Errorf("job 1 data_at %q, want node0's API %s", j1.DataAt, node0)
	}
	// The live log the provider posted to node1 was relayed to node0
	// (kept there until 30 s after the job ended).
	var live struct {
		Chunks []struct {
			Provider string `json:"provider"`
		} `json:"chunks"`
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(node0, "http://") + "/v1/jobs/1/logs"); err != nil {
		t.Fatal(err)
	} else {
		json.NewDecoder(resp.Body).Decode(&live)
		resp.Body.Close()
	}
	if len(live.Chunks) == 0 || live.Chunks[0].Provider != carol.Address {
		t.Errorf("node0's live log of job 1: %+v, want the chunks carol posted to node1", live)
	}
	logs := gpunet(t, "job", "logs", "1", "--from", "alice", "--home", keyHome, "--node", node0)
	if logs.code != 0 || !strings.Contains(logs.stdout, "wordcount:") {
		t.Fatalf("job logs on node0: %v", logs)
	}

	// 2. A URL-pinned input, served by a test HTTP server, named by a
	// host name (job specs refuse a literal loopback address).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(input) }))
	t.Cleanup(srv.Close)
	srvURL := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	sum := sha256.Sum256(input)
	out = filepath.Join(dir, "out2")
	r = gpunet(t, "job", "run", spec("url-input", "  - {path: /in/input.txt, from: "+srvURL+"/input.txt, sha256: "+hex.EncodeToString(sum[:])+"}\n"),
		"--from", "alice", "--home", keyHome, "--node", node0, "--out", out)
	if b, err := os.ReadFile(filepath.Join(out, "out", "counts.txt")); r.code != 0 || err != nil || !strings.Contains(string(b), "the") {
		t.Fatalf("job with a URL input: %v; counts %q %v", r, b, err)
	}

	// 3. A wrong sha256: handed back, with the reason on the job.
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", spec("wrong-hash", "  - {path: /in/input.txt, from: "+srvURL+"/input.txt, sha256: "+strings.Repeat("ab", 32)+"}\n"),
		"--from", "alice", "--home", keyHome, "--node", node0)
	var j3 struct {
		State    string `json:"state"`
		Reason   string `json:"reason"`
		Released string `json:"released"`
	}
	waitUntil(t, 90*time.Second, "the wrong-hash job handed back", func() bool {
		return ownerJob(t, keyHome, "alice", fmt.Sprint(sub.ID), "--node", node0).Released != ""
	})
	gpunetJSON(t, &j3, "job", "status", fmt.Sprint(sub.ID), "--from", "alice", "--home", keyHome, "--node", node0)
	if !strings.Contains(j3.Released, carol.Address) || !strings.Contains(j3.Released, "hash") {
		t.Fatalf("released %q, want the provider and the hash mismatch", j3.Released)
	}
	text := gpunet(t, "job", "status", fmt.Sprint(sub.ID), "--home", keyHome, "--node", node0)
	if !strings.Contains(text.stdout, "handed back") {
		t.Errorf("job status does not say it was handed back:\n%s", text.stdout)
	}
	gpunet(t, "job", "cancel", fmt.Sprint(sub.ID), "--from", "alice", "--home", keyHome, "--node", node0)

	// 4. gpunet storage on node0.
	var st struct {
		Blobs            int   `json:"blobs"`
		Bytes            int64 `json:"bytes"`
		RetentionSeconds int64 `json:"retention_seconds"`
		Account          *struct {
			Address    string `json:"address"`
			QuotaBytes int64  `json:"quota_bytes"`
		} `json:"account"`
	}
	gpunetJSON(t, &st, "storage", "--from", "alice", "--home", keyHome, "--node", node0)
	if st.Blobs == 0 || st.Bytes == 0 || st.RetentionSeconds <= 0 || st.Account == nil || st.Account.Address != alice.Address || st.Account.QuotaBytes <= 0 {
		t.Fatalf("storage: %+v", st)
	}
	if r := gpunet(t, "storage", "--from", "alice", "--home", keyHome, "--node", node0); r.code != 0 || !strings.Contains(r.stdout, "retention") {
		t.Fatalf("storage text: %v", r)
	}
}
