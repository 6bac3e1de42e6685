package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/seal"
	"github.com/gpunet/gpunet/internal/validator"
)

const serviceYAML = `name: tinylm
kind: service
image: 127.0.0.1:5000/gpunet/tinylm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ports:
  - {port: 8000, name: api}
  - {port: 8443, protocol: tcp}
readiness: {path: /health}
budget: 5 SYNC
max_price: 4 SYNC/h
openai: {models: [tinylm]}
`

func (s *story) writeSpec(name, data string) string {
	s.t.Helper()
	p := filepath.Join(s.home, "spec", name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *story) service(id uint64) *ledger.Service {
	s.t.Helper()
	svc, err := chainclient.New(s.url).Service(s.t.Context(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return svc
}

// TestServiceStory: a service's life through the CLI against the node's
// real API and ledger: deploy keeps and prints an access key whose hash
// the chain holds; status, list and key read it back; scale, topup,
// access, evict and stop change it; logs decrypt what its provider
// relays; the wrong kind of spec and the wrong key are refused by name.
func TestServiceStory(t *testing.T) {
	s := newStory(t)
	// p1 runs containers too, so that the service is placed on it.
	pi := lt.ProviderInfo("", 0, 3_600_000)
	pi.EncryptionKey = s.provID.Recipient().String()
	pi.Executors = []string{ledger.ExecutorWASM, ledger.ExecutorOCI}
	s.chain.Send(s.prov, &ledger.MsgUpdateProvider{ProviderInfo: pi})
	spec := s.writeSpec("svc.yaml", serviceYAML)

	// A quote first: who could take it, at what rate, for how long.
	var q ledger.ServiceQuote
	if err := json.Unmarshal([]byte(s.ok("service", "quote", spec, "-o", "json")), &q); err != nil || q.Matching != 1 || len(q.Best) != 1 || q.Best[0].Provider != s.prov.Addr {
		t.Fatalf("service quote -o json: %v, %+v; want p1", err, q)
	}
	if q.Budget != 5_000_000 || q.RatePerHour <= q.PricePerHour || q.LastsSeconds != 5_000_000*3600/q.RatePerHour {
		t.Errorf("quote %+v: want the spec's budget, the rate with the fee and how long it lasts", q)
	}
	out := s.ok("service", "quote", spec, "--replicas", "2", "--budget", "1sync")
	for _, want := range []string{"1 provider(s) could take a replica", "1 of 2 replica(s) would wait for a provider", "rate: ", "a budget of 1 SYNC lasts about"} {
		if !strings.Contains(out, want) {
			t.Errorf("quote output lacks %q:\n%s", want, out)
		}
	}
	if out := s.ok("service", "quote", spec, "--budget", "1usync"); !strings.Contains(out, "is too small to deploy it: at least") {
		t.Errorf("quote with a budget below the least:\n%s", out)
	}
	if r := s.run("service", "quote", filepath.Join(s.home, "spec", "job.yaml")); r.code != ExitUsage || !strings.Contains(r.stderr, "is a batch job spec") {
		t.Errorf("quote of a batch spec: exit %d, %q", r.code, r.stderr)
	}

	var dep deployResult
	if err := json.Unmarshal([]byte(s.ok("service", "deploy", spec, "--from", "alice", "-o", "json")), &dep); err != nil || dep.ID != 1 {
		t.Fatalf("service deploy -o json: %v, %+v", err, dep)
	}
	if !strings.HasPrefix(dep.AccessKey, "sk-gpunet-") || len(dep.AccessKey) != len("sk-gpunet-")+43 {
		t.Errorf("access key %q: want sk-gpunet- and 43 base64url characters", dep.AccessKey)
	}
	kept, err := os.ReadFile(filepath.Join(s.home, "services", "1.key"))
	if err != nil || strings.TrimSpace(string(kept)) != dep.AccessKey || dep.KeyFile != filepath.Join(s.home, "services", "1.key") {
		t.Errorf("kept key %q (%v) in %s; want %q", kept, err, dep.KeyFile, dep.AccessKey)
	}
	if fi, err := os.Stat(dep.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if len(dep.Addresses.Ports) != 2 || dep.Addresses.Ports[0].URL != s.url+"/svc/1/8000/" || dep.Addresses.OpenAI != s.url+"/openai/v1" {
		t.Errorf("addresses %+v", dep.Addresses)
	}
	svc := s.service(1)
	if svc.Public || len(svc.KeyHashes) != 1 || svc.KeyHashes[0] != sha256.Sum256([]byte(dep.AccessKey)) {
		t.Errorf("the chain's access: public %v, hashes %v; want the key's SHA-256", svc.Public, svc.KeyHashes)
	}
	if svc.ConsumerKey != s.alice.Recipient() || svc.Budget != 5_000_000 || svc.Spec.Readiness.Port != 8000 || svc.Spec.OpenAI.Port != 8000 {
		t.Errorf("service %+v", svc)
	}

	// Text: the key once, where it is kept, addresses and what next.
	out = s.ok("service", "deploy", spec, "--from", "alice", "--replicas", "2", "--budget", "6sync", "--public")
	for _, want := range []string{"service 2 deployed", "2 replica(s)", "6 SYNC", "public: anyone", "/svc/2/8000/", "8443/tcp: gpunet service connect 2 --port 8443", "/openai/v1", "gpunet service status 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy output lacks %q:\n%s", want, out)
		}
	}
	if svc := s.service(2); !svc.Public || svc.Spec.Replicas != 2 || svc.Budget != 6_000_000 {
		t.Errorf("flags did not override the spec: %+v", svc)
	}
	if _, err := os.Stat(filepath.Join(s.home, "services", "2.key")); !os.IsNotExist(err) {
		t.Errorf("a public service has a key file: %v", err)
	}

	out = s.ok("service", "status", "1")
	for _, want := range []string{`service 1 "tinylm": active`, "access:      private, 1 key(s)", "budget:      5 SYNC in all", "replicas:    1 wanted", "openai:      models tinylm; not declared bit-exact", "api 8000/http: " + s.url + "/svc/1/8000/"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var list []ledger.Service
	if err := json.Unmarshal([]byte(s.ok("service", "list", "--owner", "alice", "-o", "json")), &list); err != nil || len(list) != 2 || list[0].ID != 2 {
		t.Errorf("service list --owner alice: %v, %d services", err, len(list))
	}
	if out := s.ok("service", "list"); !strings.Contains(out, "tinylm") || !strings.Contains(out, "alice") {
		t.Errorf("service list:\n%s", out)
	}
	if out := s.ok("service", "key", "1"); strings.TrimSpace(out) != dep.AccessKey {
		t.Errorf("service key 1 = %q, want %q", out, dep.AccessKey)
	}

	if svc := s.service(1); len(svc.Replicas) != 1 || svc.Replicas[0].Provider != s.prov.Addr {
		t.Errorf("service 1 was not placed on p1: %+v", svc.Replicas)
	}
	if r := s.run("service", "logs", "1", "--from", "bob"); r.code == 0 || !strings.Contains(r.stderr, "service 1 belongs to alice") {
		t.Errorf("logs as bob: exit %d, %q", r.code, r.stderr)
	}

	s.ok("service", "scale", "1", "2")
	if got := s.service(1).Spec.Replicas; got != 2 {
		t.Errorf("after scale 1 2: %d replicas wanted", got)
	}
	s.ok("service", "topup", "1", "1sync", "--from", "bob")
	if got := s.service(1).Budget; got != 6_000_000 {
		t.Errorf("after topup 1sync: budget %d", got)
	}

	var acc accessResult
	if err := json.Unmarshal([]byte(s.ok("service", "access", "1", "--new-key", "-o", "json")), &acc); err != nil || acc.AccessKey == "" || acc.AccessKey == dep.AccessKey {
		t.Fatalf("access --new-key: %v, %+v", err, acc)
	}
	if svc := s.service(1); svc.Public || len(svc.KeyHashes) != 1 || svc.KeyHashes[0] != sha256.Sum256([]byte(acc.AccessKey)) {
		t.Errorf("after --new-key: %v %v", svc.Public, svc.KeyHashes)
	}
	if out := s.ok("service", "key", "1"); strings.TrimSpace(out) != acc.AccessKey {
		t.Errorf("key after --new-key = %q", out)
	}
	// The text says what is true of the key: kept in this home and
	// printed again by service key, not "shown once" (issue 33).
	out = s.ok("service", "access", "1", "--new-key")
	if strings.Contains(out, "once") || !strings.Contains(out, "1.key; gpunet service key 1 prints it again") {
		t.Errorf("access --new-key says:\n%s\nwant where the key is kept and that gpunet service key 1 prints it again", out)
	}
	if key := strings.TrimSpace(s.ok("service", "key", "1")); !strings.Contains(out, "new access key (the old ones no longer work): "+key+"\n") {
		t.Errorf("access --new-key printed\n%s\nbut service key 1 prints %q", out, key)
	}
	s.ok("service", "access", "1", "--public")
	if svc := s.service(1); !svc.Public || len(svc.KeyHashes) != 1 {
		t.Errorf("after --public: public %v, %d keys (kept for going private again)", svc.Public, len(svc.KeyHashes))
	}
	s.ok("service", "access", "1", "--private")
	if svc := s.service(1); svc.Public {
		t.Error("still public after --private")
	}
	if r := s.run("service", "access", "1", "--public", "--private"); r.code != ExitUsage {
		t.Errorf("--public --private: exit %d", r.code)
	}

	out = s.ok("service", "evict", "1", s.prov.Addr.String(), "--reason", "slow")
	if !strings.Contains(out, "was evicted") {
		t.Errorf("evict:\n%s", out)
	}
	if svc := s.service(1); len(svc.Ended) == 0 || svc.Ended[len(svc.Ended)-1].Provider != s.prov.Addr {
		t.Errorf("after evict: ended %+v", svc.Ended)
	}

	if r := s.run("service", "stop", "1", "--from", "bob"); r.code == 0 || !strings.Contains(r.stderr, "belongs to alice") {
		t.Errorf("stop as bob: exit %d, %q", r.code, r.stderr)
	}
	out = s.ok("service", "stop", "1")
	if svc := s.service(1); svc.State != ledger.ServiceStopped || !strings.Contains(out, "service 1 stopped") || !strings.Contains(out, "refunded") {
		t.Errorf("after stop: %s\n%s", svc.State, out)
	}

	// The wrong kind of spec, each way.
	if r := s.run("job", "submit", spec, "--from", "alice"); r.code != ExitUsage || !strings.Contains(r.stderr, "gpunet service deploy") {
		t.Errorf("job submit of a service: exit %d, %q", r.code, r.stderr)
	}
	if r := s.run("service", "deploy", filepath.Join(s.home, "spec", "job.yaml"), "--from", "alice"); r.code != ExitUsage || !strings.Contains(r.stderr, "add kind: service") {
		t.Errorf("service deploy of a job: exit %d, %q", r.code, r.stderr)
	}
	bad := s.writeSpec("bad.yaml", serviceYAML+"timeout: 1h\n")
	if r := s.run("service", "deploy", bad, "--from", "alice"); r.code != ExitUsage || !strings.Contains(r.stderr, "timeout: is not for a service") {
		t.Errorf("deploy with timeout: exit %d, %q", r.code, r.stderr)
	}
	if r := s.run("service", "deploy", spec, "--from", "alice", "--replicas", "17"); r.code != ExitUsage {
		t.Errorf("--replicas 17: exit %d", r.code)
	}
	if r := s.run("service", "key", "2"); r.code == 0 || !strings.Contains(r.stderr, "access 2 --new-key") {
		t.Errorf("key of a public service: exit %d, %q", r.code, r.stderr)
	}

	// Every command's JSON is JSON.
	for _, args := range [][]string{
		{"service", "status", "1"}, {"service", "list"}, {"service", "key", "1"},
		{"service", "scale", "2", "1"}, {"service", "topup", "2", "1000usync"}, {"service", "access", "2", "--private"},
		{"service", "stop", "2"}, {"service", "stop", "2"},
	} {
		r := s.run(append(args, "-o", "json")...)
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		for dec.More() {
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Errorf("gpunet %s -o json: stdout is not JSON (%v):\n%s", strings.Join(args, " "), err, r.stdout)
				break
			}
		}
		if r.code != 0 {
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error == "" {
				t.Errorf("gpunet %s -o json: exit %d and stderr is not a JSON error: %q", strings.Join(args, " "), r.code, r.stderr)
			}
		}
	}

	// A float model with a tolerance on log-probabilities: status says
	// what its providers serve under.
	tolSpec := s.writeSpec("tol.yaml", strings.Replace(serviceYAML, "openai: {models: [tinylm]}", "openai: {models: [tinylm], tolerance: {logprob: 0.05}}", 1))
	s.ok("service", "deploy", tolSpec, "--from", "alice", "--public")
	if out := s.ok("service", "status", "3"); !strings.Contains(out, "openai:      models tinylm; tolerance 0.05 nats on log-probabilities (openai.tolerance)") {
		t.Errorf("status of a service with a tolerance:\n%s", out)
	}
}

// TestServiceConnect: connect listens locally and joins each connection to
// the node's /svc/{id}/{port} tunnel (Upgrade: gpunet-tcp, the key in
// X-Gpunet-Key), passing bytes both ways, a half-close included; a
// refusal from the node is reported, not fatal.
func TestServiceConnect(t *testing.T) {
	const key = "sk-gpunet-test"
	svc := ledger.Service{ID: 3, State: ledger.ServiceActive, Spec: ledger.ServiceSpec{Ports: []ledger.ServicePort{{Port: 8443, Protocol: ledger.PortTCP}}}}
	refused := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/services/3":
			json.NewEncoder(w).Encode(svc)
			return
		case "/svc/3/8443":
		default:
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Upgrade") != "gpunet-tcp" || !strings.EqualFold(r.Header.Get("Connection"), "Upgrade") {
			refused <- "no upgrade"
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Gpunet-Key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"code": "unauthenticated", "message": "service 3 needs an access key"})
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: gpunet-tcp\r\n\r\n")
		brw.Flush()
		// Echo upper-cased until the client half-closes, then say bye.
		in, _ := io.ReadAll(brw.Reader)
		c.Write(bytes.ToUpper(in))
		c.Write([]byte(" bye"))
	}))
	defer srv.Close()

	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "services"), 0o700)
	os.WriteFile(filepath.Join(home, "services", "3.key"), []byte(key+"\n"), 0o600)
	addr, err := validator.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"service", "connect", "3", "--port", "8443", "--listen", addr, "--node", srv.URL, "--home", home}, &out, &errOut)
	}()
	var c net.Conn
	for i := 0; ; i++ {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("connect does not listen on %s: %v; stderr %s", addr, err, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(bufio.NewReader(c))
	c.Close()
	if string(got) != "HELLO bye" {
		t.Errorf("through the tunnel: %q, want %q", got, "HELLO bye")
	}
	if !strings.Contains(out.String(), "forwarding "+addr+" to service 3 port 8443") {
		t.Errorf("stdout %q", out.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("connect exit %d after Ctrl-C: %s", code, errOut.String())
	}
	select {
	case r := <-refused:
		t.Errorf("the node refused: %s", r)
	default:
	}

	// A wrong key: the node's refusal is reported on stderr.
	cl := chainclient.New(srv.URL)
	if _, err := cl.DialService(t.Context(), 3, 8443, "sk-gpunet-wrong"); err == nil || !strings.Contains(err.Error(), "needs an access key") {
		t.Errorf("DialService with a wrong key: %v", err)
	}
	// A port the service does not declare is a usage error.
	if code := Run(t.Context(), []string{"service", "connect", "3", "--port", "22", "--node", srv.URL, "--home", home}, io.Discard, io.Discard); code != ExitUsage {
		t.Errorf("connect --port 22: exit %d", code)
	}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestServiceLogs: logs reads the node's pages of a service's live log,
// decrypts each chunk with the owner's key and prints its lines (as JSON
// objects with -o json); a chunk sealed to another key is reported in
// the stream, not fatal; -f reads until the service has stopped.
func TestServiceLogs(t *testing.T) {
	s := newStory(t) // for the home and alice's key
	seal1 := func(to, text string) []byte {
		var b bytes.Buffer
		r, _ := seal.ParseRecipient(to)
		enc, _ := seal.Encrypt(&b, r)
		enc.Write([]byte(text))
		enc.Close()
		return b.Bytes()
	}
	var mu sync.Mutex
	stopped := false
	svc := ledger.Service{ID: 1, Owner: s.alice.Address, State: ledger.ServiceActive, ConsumerKey: s.alice.Recipient()}
	chunks := []apiwire.LogChunk{
		{Seq: 0, Provider: s.prov.Addr, Data: seal1(s.alice.Recipient(), "one\ntwo\n")},
		{Seq: 1, Provider: s.prov.Addr, Data: seal1(s.bob.Recipient(), "secret\n")},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/services/1":
			v := svc
			if stopped {
				v.State = ledger.ServiceStopped
			}
			json.NewEncoder(w).Encode(v)
		case "/v1/services/1/logs":
			var from uint64
			fmt.Sscan(r.URL.Query().Get("from"), &from)
			page := apiwire.LogPage{Chunks: []apiwire.LogChunk{}, Next: uint64(len(chunks))}
			for _, c := range chunks {
				if c.Seq >= from {
					page.Chunks = append(page.Chunks, c)
				}
			}
			if from >= 2 && !stopped {
				// The service writes its last line and stops.
				chunks = append(chunks, apiwire.LogChunk{Seq: 2, Provider: s.prov.Addr, Data: seal1(s.alice.Recipient(), "three\n")})
				stopped = true
			}
			json.NewEncoder(w).Encode(page)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--node", srv.URL, "--home", s.home)
		if code := Run(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("gpunet %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	out := run("service", "logs", "1")
	if !strings.HasPrefix(out, "one\ntwo\n[gpunet: log chunk 1 from "+s.prov.Addr.String()+" unreadable") {
		t.Errorf("service logs 1:\n%s", out)
	}
	var lines []map[string]any
	dec := json.NewDecoder(strings.NewReader(run("service", "logs", "1", "-o", "json")))
	for dec.More() {
		var l map[string]any
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 3 || lines[0]["line"] != "one" || lines[0]["service"] != float64(1) || lines[0]["provider"] != s.prov.Addr.String() {
		t.Errorf("service logs -o json: %v", lines)
	}
	if out := run("service", "logs", "1", "-f", "--poll", "10ms"); !strings.HasSuffix(out, "three\n") {
		t.Errorf("service logs -f does not read to the end:\n%s", out)
	}
}

// TestServiceProbe: probe sends the kept key, prints each replica's
// verdict, and exits 1 (saying how to evict) when a replica its provider
// reports ready fails; a private service without a kept key is refused
// before the node is asked.
func TestServiceProbe(t *testing.T) {
	const key = "sk-gpunet-test"
	good, bad := lt.NewKey("good").Addr, lt.NewKey("bad").Addr
	svc := ledger.Service{ID: 3, State: ledger.ServiceActive}
	probe := apiwire.ServiceProbe{Service: 3, Node: "http://node0", Replicas: []apiwire.ReplicaProbe{
		{Provider: good, Ready: true, OK: true, Route: "session", Millis: 1.5, Status: 200},
		{Provider: bad, Ready: false, Route: "relay", Millis: 3, Error: "no route"},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/services/3":
			json.NewEncoder(w).Encode(svc)
		case "/v1/services/3/probe":
			if r.Header.Get("X-Gpunet-Key") != key {
				w.WriteHeader(http.StatusUnauthorized)
				json.NewEncoder(w).Encode(map[string]string{"code": "unauthenticated", "message": "service 3 needs an access key"})
				return
			}
			json.NewEncoder(w).Encode(probe)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	home := t.TempDir()
	run := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), []string{"service", "probe", "3", "--node", srv.URL, "--home", home}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, stderr := run(); code == 0 || !strings.Contains(stderr, "no access key of it is in") {
		t.Errorf("no kept key: exit %d, %q", code, stderr)
	}
	os.MkdirAll(filepath.Join(home, "services"), 0o700)
	os.WriteFile(filepath.Join(home, "services", "3.key"), []byte(key+"\n"), 0o600)
	code, stdout, stderr := run()
	if code != 0 || !strings.Contains(stdout, "service 3 probed from http://node0") || !strings.Contains(stdout, good.String()) || !strings.Contains(stdout, "ok in 1.5 ms") ||
		!strings.Contains(stdout, "reported not ready") || !strings.Contains(stdout, "FAILED after 3.0 ms: no route") {
		t.Errorf("probe (a failing replica not reported ready): exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	probe.Replicas[1].Ready = true
	if code, _, stderr := run(); code != 1 || !strings.Contains(stderr, "1 replica(s) reported ready failed the probe from http://node0: evict with gpunet service evict 3 PROVIDER") {
		t.Errorf("a ready replica failing: exit %d, %q", code, stderr)
	}
}
