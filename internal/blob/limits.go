package blob

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what uploads may take from a gateway: how many run at once
// (in all and per client address) and how slowly they may send. Without
// them a thousand clients each sending a byte every few seconds hold a
// thousand connections and temporary files for as long as they like. A
// zero field takes the default below; a negative one turns that limit off.
type Limits struct {
	// MaxUploads bounds the uploads in progress; past it a PUT is
	// answered 503 before its body is read.
	MaxUploads int
	// MaxUploadsPerIP bounds the uploads in progress from one client
	// address; past it a PUT is answered 429 before its body is read.
	MaxUploadsPerIP int
	// IdleTimeout is how long an upload may send nothing before it is cut
	// off (408).
	IdleTimeout time.Duration
	// MinRate is the average rate, in bytes a second, below which an
	// upload is cut off (408) once it has run for RateGrace. It catches
	// the client that sends one byte just before each idle deadline.
	MinRate   int64
	RateGrace time.Duration
}

// Default limits. A node's gateway serves a few consumers and providers
// uploading job data at once; 64 uploads hold at most 128 file
// descriptors (a connection and a temporary file each), a small part of
// what a node reserves for its API (internal/daemon).
const (
	DefaultMaxUploads      = 64
	DefaultMaxUploadsPerIP = 16
	DefaultIdleTimeout     = 30 * time.Second
	DefaultMinRate         = 4 << 10 // 4 KiB/s: a very slow link, far above a trickle
	DefaultRateGrace       = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxUploads, DefaultMaxUploads)
	def(&l.MaxUploadsPerIP, DefaultMaxUploadsPerIP)
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MinRate == 0 {
		l.MinRate = DefaultMinRate
	}
	if l.RateGrace == 0 {
		l.RateGrace = DefaultRateGrace
	}
	return l
}

// uploadSlots counts the uploads in progress, in all and per client
// address.
type uploadSlots struct {
	max, perIP int
	mu         sync.Mutex
	n          int
	byIP       map[string]int
}

// errBusy and errBusyIP are why acquire refused a slot.
var (
	errBusy   = errors.New("busy")
	errBusyIP = errors.New("busy for this address")
)

// acquire takes a slot for an upload from ip, or says which limit is
// reached. The returned func gives the slot back.
func (u *uploadSlots) acquire(ip string) (func(), error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.perIP > 0 && u.byIP[ip] >= u.perIP {
		return nil, errBusyIP
	}
	if u.max > 0 && u.n >= u.max {
		return nil, errBusy
	}
	if u.byIP == nil {
		u.byIP = make(map[string]int)
	}
	u.n++
	u.byIP[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.n--
			if u.byIP[ip]--; u.byIP[ip] <= 0 {
				delete(u.byIP, ip)
			}
		})
	}, nil
}

// clientIP is the address r came from, without its port. Forwarded
// headers are ignored: anyone can write them.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// errTooSlow is why a progressReader gave up on its client.
var errTooSlow = errors.New("upload too slow")

// progressReader reads an upload's body under a progress deadline: before
// each read it moves the connection's read deadline to IdleTimeout from
// now, so a stalled client is cut off by the connection itself (no
// goroutine waits for it), and after RateGrace it fails when the average
// rate falls below MinRate.
type progressReader struct {
	r     io.Reader
	rc    *http.ResponseController
	lim   Limits
	start time.Time
	n     int64
	now   func() time.Time
}

func newProgressReader(w http.ResponseWriter, r io.Reader, lim Limits) *progressReader {
	return &progressReader{r: r, rc: http.NewResponseController(w), lim: lim, start: time.Now(), now: time.Now}
}

func (p *progressReader) Read(b []byte) (int, error) {
	now := p.now()
	if p.lim.IdleTimeout > 0 {
		// An error means the writer cannot set deadlines (a test
		// recorder); the rate check still applies.
		p.rc.SetReadDeadline(now.Add(p.lim.IdleTimeout))
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if err != nil && err != io.EOF && isTimeout(err) {
		return n, fmt.Errorf("%w: nothing received for %v (the gateway's idle limit) after %d bytes", errTooSlow, p.lim.IdleTimeout, p.n)
	}
	if elapsed := p.now().Sub(p.start); p.lim.MinRate > 0 && err == nil && elapsed > p.lim.RateGrace {
		if rate := float64(p.n) / elapsed.Seconds(); rate < float64(p.lim.MinRate) {
			return n, fmt.Errorf("%w: %d bytes in %v is %.0f bytes/s, below the gateway's minimum of %d bytes/s", errTooSlow, p.n, elapsed.Round(time.Millisecond), rate, p.lim.MinRate)
		}
	}
	return n, err
}

// done lifts the read deadline so that the response can be written and
// the connection reused.
func (p *progressReader) done() { p.rc.SetReadDeadline(time.Time{}) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
