package netstats

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/jobtext"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Update is one message of the live feed.
type Update struct {
	Type   string        `json:"type"` // block, job
	Block  *BlockSummary `json:"block,omitempty"`
	Sample *Sample       `json:"sample,omitempty"`
	Job    *JobUpdate    `json:"job,omitempty"`
}

// JobUpdate is a job that changed state.
type JobUpdate struct {
	ID     uint64 `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Owner  string `json:"owner"`
}

// subBuffer is how many updates a slow subscriber may fall behind before
// it is dropped (a browser's EventSource reconnects by itself).
const subBuffer = 256

// Subscribe returns a channel of updates and a function that ends the
// subscription. The channel closes when the subscriber falls too far
// behind or cancel is called.
func (s *Stats) Subscribe() (<-chan Update, func()) {
	ch := make(chan Update, subBuffer)
	s.subMu.Lock()
	s.subs[ch] = struct{}{}
	s.subMu.Unlock()
	return ch, func() {
		s.subMu.Lock()
		defer s.subMu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

func (s *Stats) publish(u Update) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- u:
		default:
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// Routes are the API routes the stats serve, for apiserver.Server.Mount.
func (s *Stats) Routes() []apiserver.Route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	return []apiserver.Route{
		{Method: "GET", Path: "/v1/stats/overview", ID: "getOverview", Tag: "stats",
			Summary: "The network now: providers and GPUs online by class and region, median prices, utilisation, jobs by state, the last block",
			Resp:    Overview{}, Handler: h(s.serveOverview)},
		{Method: "GET", Path: "/v1/stats/series", ID: "listSeries", Tag: "stats",
			Summary: "Per-block samples (utilisation, prices, jobs, tx/s), oldest first; the node keeps the latest " + strconv.Itoa(s.o.SeriesLen),
			List:    true, Resp: SeriesPage{}, Errors: []int{400}, Handler: h(s.serveSeries)},
		{Method: "GET", Path: "/v1/events", ID: "listEvents", Tag: "stats",
			Summary: "Recent ledger events, newest first; the node keeps the latest " + strconv.Itoa(s.o.EventsLen),
			Query: []apiserver.Param{
				{Name: "type", Type: "string", Desc: "only events of this type, e.g. job_assigned"},
				{Name: "job", Type: "integer", Desc: "only events of this job"},
			},
			List: true, Resp: EventPage{}, Errors: []int{400}, Handler: h(s.serveEvents)},
		{Method: "GET", Path: "/v1/stream", ID: "stream", Tag: "stats",
			Summary:  "Live updates as server-sent events: event block (each block's summary and sample) and event job (a job changed state)",
			RespType: "text/event-stream", Timeout: -1, Handler: h(s.serveStream)},
		{Method: "GET", Path: "/v1/providers/{addr}/history", ID: "listProviderHistory", Tag: "providers",
			Summary:    "A provider's recent events (challenges, jobs, stake, status), newest first",
			PathParams: map[string]string{"addr": "the provider's address"},
			List:       true, Resp: EventPage{}, Errors: []int{400}, Handler: h(s.serveProviderHistory)},
		{Method: "GET", Path: "/v1/jobs/{id}/timeline", ID: "getJobTimeline", Tag: "jobs",
			Summary:    "A job's timeline: submission, placements, starts, results and end from its record, and the state changes this node saw",
			PathParams: map[string]string{"id": "a job id (a positive integer)"},
			Resp:       Timeline{}, Errors: []int{400, 404}, Handler: h(s.serveTimeline)},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) { apiserver.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, msg string) {
	code := map[int]string{400: apiwire.CodeInvalidArgument, 404: apiwire.CodeNotFound, 503: apiwire.CodeUnavailable}[status]
	if code == "" {
		code = apiwire.CodeInternal
	}
	writeJSON(w, status, apiwire.ErrorBody{Code: code, Message: msg})
}

func (s *Stats) serveOverview(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Overview())
}

// SeriesPage is GET /v1/stats/series.
type SeriesPage struct {
	Samples    []Sample `json:"samples"`
	NextCursor string   `json:"next_cursor"`
}

func pageLimit(r *http.Request, def int) (int, error) {
	l := r.URL.Query().Get("limit")
	if l == "" {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > apiwire.MaxPageLimit {
		return 0, fmt.Errorf("limit %q: want an integer from 1 to %d", l, apiwire.MaxPageLimit)
	}
	return n, nil
}

func uintParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}

// serveSeries: the cursor is the height after which samples start; a page
// holds the oldest samples after it.
func (s *Stats) serveSeries(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r, apiwire.DefaultPageLimit)
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	after, err := uintParam(r, "cursor")
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	all := s.Series(after, s.o.SeriesLen)
	out := SeriesPage{Samples: all}
	if len(all) > limit {
		out.Samples = all[:limit]
		out.NextCursor = strconv.FormatUint(all[limit-1].Height, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// EventPage is GET /v1/events and GET /v1/providers/{addr}/history.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor"`
}

func (s *Stats) eventPage(w http.ResponseWriter, r *http.Request, keep func(*Event) bool) {
	limit, err := pageLimit(r, apiwire.DefaultPageLimit)
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	before, err := uintParam(r, "cursor")
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	evs, next := s.Events(before, limit, keep)
	out := EventPage{Events: evs}
	if next > 0 {
		out.NextCursor = strconv.FormatUint(next, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Stats) serveEvents(w http.ResponseWriter, r *http.Request) {
	typ := r.URL.Query().Get("type")
	job, err := uintParam(r, "job")
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	s.eventPage(w, r, func(e *Event) bool {
		return (typ == "" || e.Type == typ) && (job == 0 || e.Job == job)
	})
}

func (s *Stats) serveProviderHistory(w http.ResponseWriter, r *http.Request) {
	a, err := address.Parse(r.PathValue("addr"))
	if err != nil {
		writeError(w, 400, err.Error())
		return
	}
	addr := a.String()
	s.eventPage(w, r, func(e *Event) bool { return slices.Contains(e.Providers, addr) })
}

// Timeline is GET /v1/jobs/{id}/timeline.
type Timeline struct {
	Job   uint64 `json:"job"`
	State string `json:"state"`
	// Steps are the milestones the job's record holds, in time order.
	Steps []Step `json:"steps"`
	// Observed are the state changes this node saw (every one, for jobs
	// submitted while it ran).
	Observed []Transition `json:"observed"`
}

// Step is one milestone of a job.
type Step struct {
	What     string    `json:"what"` // submitted, assigned, key_granted, started, result, succeeded, failed, cancelled
	Time     time.Time `json:"time"`
	Height   uint64    `json:"height,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// StepsOf lists a job's milestones from its record.
func StepsOf(j *ledger.Job) []Step {
	unix := func(t int64) time.Time { return time.Unix(t, 0).UTC() }
	steps := []Step{{What: "submitted", Time: unix(j.SubmittedAt), Height: j.Height}}
	for _, a := range j.Assignments {
		p := a.Provider.String()
		steps = append(steps, Step{What: "assigned", Time: unix(a.AssignedAt), Provider: p, Detail: "at " + strconv.FormatFloat(float64(a.PricePerHour)/1e6, 'f', -1, 64) + " SYNC/h"})
		if a.StartedAt != 0 {
			steps = append(steps, Step{What: "started", Time: unix(a.StartedAt), Provider: p})
		}
		if r := a.Result; r != nil {
			d := fmt.Sprintf("exit %d, %d s metered", r.ExitCode, r.MeteredSeconds)
			if r.Failed {
				d = "failed: " + r.Reason + "; " + d
			}
			steps = append(steps, Step{What: "result", Height: r.Height, Provider: p, Detail: d})
		}
	}
	if j.Done() {
		steps = append(steps, Step{What: j.State, Time: unix(j.FinishedAt), Detail: jobtext.Job(j)})
	}
	return steps
}

func (s *Stats) serveTimeline(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, 400, fmt.Sprintf("job id %q: want a positive integer", r.PathValue("id")))
		return
	}
	kv, release := s.chain.View()
	j, found, err := ledger.GetJob(kv, id)
	release()
	if err != nil {
		writeError(w, 500, err.Error())
		return
	}
	if !found {
		writeError(w, 404, fmt.Sprintf("no job %d", id))
		return
	}
	tl := Timeline{Job: id, State: j.State, Steps: StepsOf(j), Observed: s.Timeline(id)}
	if tl.Observed == nil {
		tl.Observed = []Transition{}
	}
	writeJSON(w, http.StatusOK, tl)
}

// serveStream sends the live feed as server-sent events until the client
// goes or the node stops. A heartbeat comment every 15 s keeps proxies
// from closing it.
func (s *Stats) serveStream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	updates, cancel := s.Subscribe()
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The first message is the state now, so a page needs no other call
	// to start.
	ov := s.Overview()
	fmt.Fprintf(w, "retry: 2000\nevent: hello\ndata: %s\n\n", mustJSON(map[string]any{"height": ov.Height, "ready": ov.Ready}))
	if err := rc.Flush(); err != nil {
		return
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
		case u, ok := <-updates:
			if !ok {
				return // fell behind; the client reconnects
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", u.Type, mustJSON(u))
		}
		rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
