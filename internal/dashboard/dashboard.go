// Package dashboard is the node's web dashboard: a single page of plain
// HTML, CSS and JavaScript embedded in the binary (it works with no
// internet: no CDN, no build step), served at / by every node. The page
// reads the node's JSON API and follows /v1/stream (server-sent events) to
// update without reloading; its charts are SVG drawn by the page itself.
//
// The package also serves what the dashboard does with the node's own
// keys: submitting a job signed by a key of the node's local keyring, and
// reading the log of a job whose owner's key is there (logs are sealed to
// the owner). Those routes need the node's API token (api_token in its
// config); without a token configured they are off.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
)

//go:embed static
var static embed.FS

// Options configure the dashboard.
type Options struct {
	// Home is the node's home: its keyring, and where job keys of
	// submitted jobs are kept (as `gpunet job` keeps them).
	Home    string
	ChainID string
	// API returns the node's own API base URL (known once it listens).
	API    func() string
	Logger *slog.Logger
	// Poll is how often a submitted job is looked at to grant its key
	// when assigned (default 200ms).
	Poll time.Duration
}

// Dashboard serves the web UI and the submissions made from it.
type Dashboard struct {
	o      Options
	assets fs.FS
	ctx    context.Context
	wg     sync.WaitGroup
}

// New returns the dashboard. Jobs submitted from it are followed (their
// key granted to the providers the ledger assigns) until they end or ctx
// does.
func New(ctx context.Context, o Options) *Dashboard {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll == 0 {
		o.Poll = 200 * time.Millisecond
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // unreachable: the directory is embedded
	}
	return &Dashboard{o: o, assets: sub, ctx: ctx}
}

// Wait waits for the followers of submitted jobs to stop (after ctx ends).
func (d *Dashboard) Wait() { d.wg.Wait() }

// MaxSubmitBytes bounds a submission from the dashboard: the spec and the
// files it names.
const MaxSubmitBytes = 64 << 20

// Routes are the dashboard's routes, for apiserver.Server.Mount.
func (d *Dashboard) Routes() []apiserver.Route {
	return []apiserver.Route{
		{Method: "GET", Path: "/{$}", ID: "dashboard", Tag: "dashboard", Summary: "The web dashboard (a single page; its assets are under /ui/)",
			RespType: "text/html", Handler: http.HandlerFunc(d.index)},
		{Method: "GET", Path: "/ui/{file...}", ID: "dashboardAsset", Tag: "dashboard", Summary: "The dashboard's embedded assets (JavaScript, CSS, icon)",
			PathParams: map[string]string{"file": "the asset's name, e.g. app.js"}, RespType: "text/javascript, text/css, image/svg+xml", Errors: []int{404}, Handler: http.HandlerFunc(d.asset)},
		{Method: "GET", Path: "/v1/dashboard/keys", ID: "listLocalKeys", Tag: "dashboard",
			Summary: "The node's local keyring (names and addresses, by name), for submitting from the dashboard",
			Auth:    true, List: true, Resp: KeyList{}, Errors: []int{400}, Handler: http.HandlerFunc(d.keys)},
		{Method: "GET", Path: "/v1/dashboard/jobs/{id}/log", ID: "getJobLogFromDashboard", Tag: "dashboard",
			Summary:    "A job's log, decrypted with its owner's key from the node's keyring: while it runs, the live chunks from ?from= on; once it has a delivered result, that result's whole log (the end of it past 1 MiB)",
			PathParams: map[string]string{"id": "a job id (a positive integer)"},
			Query: []apiserver.Param{
				{Name: "from", Type: "integer", Min: 0, Desc: "for a live log, the first chunk: the next of the previous answer (default 0)"},
			},
			Auth: true, Resp: JobLog{}, Timeout: time.Minute, Errors: []int{400, 403, 404, 503}, Handler: http.HandlerFunc(d.jobLog)},
		{Method: "POST", Path: "/v1/dashboard/jobs", ID: "submitJobFromDashboard", Tag: "dashboard",
			Summary: "Submit a job signed by a key of the node's keyring (multipart form: key, spec (YAML, as for gpunet job run), and the files it names as file parts); the node seals and uploads them, submits, and grants the job key when assigned",
			Auth:    true, BodyType: "multipart/form-data", Resp: Submitted{}, Status: http.StatusCreated,
			MaxBody: MaxSubmitBytes, Timeout: 2 * time.Minute, Errors: []int{400, 413, 422, 503}, Handler: http.HandlerFunc(d.submit)},
	}
}

// csp keeps the page to the node's own origin: no CDN, no inline script.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(d.assets, "index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.Write(b)
}

func (d *Dashboard) asset(w http.ResponseWriter, r *http.Request) {
	name := path.Clean(r.PathValue("file"))
	b, err := fs.ReadFile(d.assets, name)
	if err != nil || name == "index.html" || strings.HasPrefix(name, ".") {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no dashboard asset %q", r.PathValue("file")))
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	code := map[int]string{400: apiwire.CodeInvalidArgument, 403: apiwire.CodeForbidden, 404: apiwire.CodeNotFound, 413: apiwire.CodePayloadTooLarge,
		422: apiwire.CodeTxRejected, 503: apiwire.CodeUnavailable}[status]
	if code == "" {
		code = apiwire.CodeInternal
	}
	writeJSON(w, status, apiwire.ErrorBody{Code: code, Message: msg})
}

// KeyList is GET /v1/dashboard/keys.
type KeyList struct {
	Keys       []LocalKey `json:"keys"`
	NextCursor string     `json:"next_cursor"`
}

// LocalKey is a key of the node's keyring.
type LocalKey struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

func (d *Dashboard) keyring() (*keys.Keyring, error) {
	return keys.Open(filepath.Join(d.o.Home, "keyring"))
}

func (d *Dashboard) keys(w http.ResponseWriter, r *http.Request) {
	kr, err := d.keyring()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	limit := apiwire.DefaultPageLimit
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > apiwire.MaxPageLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want an integer from 1 to %d", l, apiwire.MaxPageLimit))
			return
		}
		limit = n
	}
	after := r.URL.Query().Get("cursor") // the last name of the previous page
	list, err := kr.List()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	slices.SortFunc(list, func(a, b *keys.Key) int { return strings.Compare(a.Name, b.Name) })
	out := KeyList{Keys: []LocalKey{}}
	for _, k := range list {
		if after != "" && k.Name <= after {
			continue
		}
		if len(out.Keys) == limit {
			out.NextCursor = out.Keys[len(out.Keys)-1].Name
			break
		}
		out.Keys = append(out.Keys, LocalKey{Name: k.Name, Address: k.Address.String()})
	}
	writeJSON(w, http.StatusOK, out)
}

// Submitted is the answer to a submission.
type Submitted struct {
	ID    uint64 `json:"id"`
	Owner string `json:"owner"`
	Key   string `json:"key"`
}

// submit takes a multipart form: key (a keyring name), spec (the YAML
// text) and file parts whose file names are the local files the spec
// names (module: ./x.wasm, inputs[].from: ./input.txt).
func (d *Dashboard) submit(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "want a multipart/form-data body with key, spec and the files the spec names: "+err.Error())
		return
	}
	dir, err := os.MkdirTemp("", "gpunet-dashboard-job-")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.RemoveAll(dir)
	var keyName string
	var spec []byte
	files := map[string]bool{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.bodyError(w, err)
			return
		}
		switch p.FormName() {
		case "key":
			b, err := io.ReadAll(io.LimitReader(p, 256))
			if err != nil {
				d.bodyError(w, err)
				return
			}
			keyName = strings.TrimSpace(string(b))
		case "spec":
			if spec, err = io.ReadAll(io.LimitReader(p, jobspec.MaxSpecSize+1)); err != nil {
				d.bodyError(w, err)
				return
			}
			if len(spec) > jobspec.MaxSpecSize {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("spec: larger than %d bytes", jobspec.MaxSpecSize))
				return
			}
		case "file":
			name := p.FileName()
			if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("file %q: want a plain file name (no directories)", name))
				return
			}
			if files[name] {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("file %q given twice", name))
				return
			}
			files[name] = true
			if err := writeFile(filepath.Join(dir, name), p); err != nil {
				d.bodyError(w, err)
				return
			}
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown form field %q (want key, spec, file)", p.FormName()))
			return
		}
	}
	if keyName == "" || len(spec) == 0 {
		writeError(w, http.StatusBadRequest, "key and spec are required")
		return
	}
	kr, err := d.keyring()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	key, err := kr.Get(keyName)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("key %q: %v", keyName, err))
		return
	}
	s, err := jobspec.Parse(spec, dir)
	if err != nil {
		writeError(w, http.StatusBadRequest, "spec: "+err.Error())
		return
	}
	// Every local file the spec names must be one of the uploaded files.
	need := []struct{ field, path string }{}
	if p, ok := s.LocalModule(); ok {
		need = append(need, struct{ field, path string }{"module", p})
	}
	if p, ok := s.Compare.LocalProgram(); ok {
		need = append(need, struct{ field, path string }{"compare.program", p})
	}
	for i := range s.Inputs {
		if p, ok := s.Inputs[i].LocalPath(); ok {
			need = append(need, struct{ field, path string }{fmt.Sprintf("inputs[%d].from", i), p})
		}
	}
	for _, n := range need {
		rel, err := filepath.Rel(dir, n.path)
		if err != nil || rel != filepath.Base(rel) || !files[rel] {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s names %s, which was not uploaded: add it as a file (a plain name, like ./%s)", n.field, filepath.Base(n.path), filepath.Base(n.path)))
			return
		}
	}
	cl := chainclient.New(d.o.API())
	jc := jobclient.New(cl, key, d.o.Home, d.o.ChainID)
	id, err := jc.Submit(r.Context(), s)
	var txErr *chainclient.TxError
	switch {
	case errors.As(err, &txErr):
		writeJSON(w, http.StatusUnprocessableEntity, apiwire.ErrorBody{Code: apiwire.CodeTxRejected, Message: txErr.Error(), LedgerCode: txErr.Result.Code, Tx: txErr.Result})
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "submit: "+err.Error())
		return
	}
	d.o.Logger.Info("job submitted from the dashboard", "job", id, "key", key.Name)
	d.follow(jc, id)
	writeJSON(w, http.StatusCreated, Submitted{ID: id, Owner: key.Address.String(), Key: key.Name})
}

// follow grants job id's key whenever it is assigned, until it ends.
func (d *Dashboard) follow(jc *jobclient.Client, id uint64) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for d.ctx.Err() == nil {
			j, err := jc.Follow(d.ctx, id, d.o.Poll, nil)
			if err == nil && j.Done() {
				return
			}
			if d.ctx.Err() != nil {
				return
			}
			d.o.Logger.Warn("following a job submitted from the dashboard", "job", id, "err", err)
			select {
			case <-d.ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

func (d *Dashboard) bodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the submission is larger than %d bytes", mbe.Limit))
		return
	}
	writeError(w, http.StatusBadRequest, "reading the form: "+err.Error())
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
