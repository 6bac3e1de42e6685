package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// devnetLogFile is where a devnet's node and providers log, in its home
// (beside CometBFT's logs/cometbft.log).
func devnetLogFile(home string) string { return filepath.Join(home, "logs", "devnet.log") }

// openDevnetLog opens (appending) the devnet's log file in home and
// returns the devnet's logger: every record at level goes to the file; of
// them, only what a user must act on is also said on stderr, in a sentence
// that names the file: errors (a provider that stopped, a hardware
// challenge it could not answer, …) and a provider's word to its operator
// (mustAct). Other warnings (a retry, a lost connection, a fault injected
// on purpose) stay in the file: the devnet's step-by-step lines on stderr
// are for people. Once ctx ends the devnet is stopping, and what fails
// then fails because it stops: the file only.
func openDevnetLog(ctx context.Context, home string, level slog.Level, stderr io.Writer) (*slog.Logger, io.Closer, error) {
	path := devnetLogFile(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("the devnet's log: %w", err)
	}
	h := &userLogHandler{
		file: slog.NewTextHandler(f, &slog.HandlerOptions{Level: level}),
		out:  &lockedWriter{w: stderr},
		path: path,
		done: ctx.Done(),
	}
	return slog.New(h), f, nil
}

// lockedWriter writes each sentence whole, from any goroutine.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// userLogHandler passes every record to file, and says each error on out
// in a sentence (userLogHandler.sentence).
type userLogHandler struct {
	file slog.Handler
	out  io.Writer
	path string
	done <-chan struct{} // closed when the devnet stops
	// ctx are the attributes the logger was made With (the provider's
	// name, the job…), for the sentence.
	ctx []slog.Attr
}

func (h *userLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.file.Enabled(ctx, l)
}

func (h *userLogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.file.Enabled(ctx, r.Level) {
		err = h.file.Handle(ctx, r)
	}
	if mustAct(r) && !h.stopping() {
		fmt.Fprintln(h.out, h.sentence(r))
	}
	return err
}

func (h *userLogHandler) stopping() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// operatorWords are how a provider agent's warnings addressed to its
// operator begin (internal/provider: a stake it cannot top up by itself).
var operatorWords = []string{"UNDER-STAKED:"}

// mustAct reports whether r needs the user: an error, or a warning a
// provider addresses to its operator.
func mustAct(r slog.Record) bool {
	if r.Level >= slog.LevelError {
		return true
	}
	if r.Level < slog.LevelWarn {
		return false
	}
	for _, w := range operatorWords {
		if strings.HasPrefix(r.Message, w) {
			return true
		}
	}
	return false
}

func (h *userLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.file = h.file.WithAttrs(as)
	c.ctx = append(append([]slog.Attr(nil), h.ctx...), as...)
	return &c
}

func (h *userLogHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.file = h.file.WithGroup(name)
	return &c
}

// sentence says an error record for people: who (the provider), about
// what (a job, a service, a challenge), what went wrong and why, and
// where the rest is, e.g. "devnet: provider-2 (job 7): commit result: tx
// rejected (… ) (the devnet's log: HOME/logs/devnet.log)".
func (h *userLogHandler) sentence(r slog.Record) string {
	var who, about, why string
	take := func(a slog.Attr) {
		switch a.Key {
		case "provider":
			who = a.Value.String()
		case "job", "service":
			about = a.Key + " " + a.Value.String()
		case "challenge":
			about = "hardware challenge of height " + a.Value.String()
		case "err":
			why = a.Value.String()
		}
	}
	for _, a := range h.ctx {
		take(a)
	}
	r.Attrs(func(a slog.Attr) bool { take(a); return true })
	var b strings.Builder
	b.WriteString("devnet: ")
	if who != "" {
		b.WriteString(who)
		if about != "" {
			b.WriteString(" (" + about + ")")
		}
		b.WriteString(": ")
	} else if about != "" {
		b.WriteString(about + ": ")
	}
	b.WriteString(r.Message)
	if why != "" {
		b.WriteString(": " + why)
	}
	b.WriteString(" (the devnet's log: " + h.path + ")")
	return b.String()
}
