package receipt

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// CompletionsPath is where a replica serves chat completions: the requests
// a Proxy gives receipts for.
const CompletionsPath = "/v1/chat/completions"

// Bounds of a Proxy.
const (
	// MaxRequestBody is the largest chat completion request a Proxy
	// reads (a node's gateway sends at most 4 MiB).
	MaxRequestBody = 8 << 20
	// maxAnswerBody is the largest whole answer a Proxy reads.
	maxAnswerBody = 32 << 20
	// maxEventLine bounds one line of an event stream.
	maxEventLine = 1 << 20
)

// Signer signs receipts for a provider.
type Signer struct {
	Key     ed25519.PrivateKey
	ChainID string
	// Now is the clock receipts are dated by (time.Now if nil).
	Now func() time.Time
}

func (s *Signer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Proxy sits between a node's stream and the port of a replica that speaks
// OpenAI's API (the agent's side): it relays HTTP/1.1 requests and answers
// as they are, and for each POST CompletionsPath answered 2xx it signs a
// receipt of the request and of the answer the client gets, sent in the
// Header header of a whole answer or as a trailer of a streamed one.
// Anything that is not HTTP passes as raw bytes.
type Proxy struct {
	Signer  *Signer
	Service uint64
	// Wrong, when set, is asked for each completion whether to answer it
	// wrongly (fault injection: `provider start --fault-wrong-answers`):
	// the answer's text is changed, and the receipt signed for what was
	// sent, as a provider that runs another model would.
	Wrong func() bool
	// IdleTimeout closes a connection that waits this long for a request
	// (default 5 minutes).
	IdleTimeout time.Duration
	Log         *slog.Logger
}

// Serve relays between client (the node's stream) and back (the replica's
// port) until either ends, and closes both.
func (p *Proxy) Serve(client, back net.Conn) {
	defer client.Close()
	defer back.Close()
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = 5 * time.Minute
	}
	cr := bufio.NewReaderSize(client, 64<<10)
	br := bufio.NewReaderSize(back, 64<<10)
	// HTTP clients speak first; a connection silent for rawWait is some
	// other protocol, whose server may speak first.
	client.SetReadDeadline(time.Now().Add(rawWait))
	if !looksHTTP(cr) {
		client.SetReadDeadline(time.Time{})
		splice(client, cr, back, br)
		return
	}
	for {
		client.SetReadDeadline(time.Now().Add(idle))
		req, err := http.ReadRequest(cr)
		if err != nil {
			return
		}
		client.SetReadDeadline(time.Time{})
		var resp *http.Response
		if req.Method == http.MethodPost && req.URL.Path == CompletionsPath && req.Header.Get("Upgrade") == "" {
			resp, err = p.completion(client, back, br, req)
		} else {
			resp, err = passThrough(client, back, cr, br, req)
		}
		if err != nil || resp == nil || req.Close || resp.Close {
			return
		}
	}
}

// rawWait is how long a Proxy waits for a connection's first byte before
// it takes it for a protocol whose server speaks first, and relays it raw.
const rawWait = time.Second

// looksHTTP reports whether the stream begins as an HTTP request does, with
// an upper-case letter (a method); TLS, say, begins with 0x16.
func looksHTTP(r *bufio.Reader) bool {
	b, err := r.Peek(1)
	return err == nil && b[0] >= 'A' && b[0] <= 'Z'
}

// passThrough relays one request and its answer unchanged; an upgrade
// (101) turns the connection into raw bytes.
func passThrough(client, back net.Conn, cr, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if err := req.Write(back); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if err := resp.Write(client); err != nil {
			return nil, err
		}
		splice(client, cr, back, br)
		return nil, nil
	}
	defer resp.Body.Close()
	return resp, resp.Write(client)
}

// completion relays one chat completion and signs its receipt.
func (p *Proxy) completion(client, back net.Conn, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxRequestBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxRequestBody {
		fmt.Fprintf(client, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return nil, errors.New("request body too large")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.TransferEncoding = nil
	if err := req.Write(back); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp, resp.Write(client)
	}
	wrong := p.Wrong != nil && p.Wrong()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		return resp, p.stream(client, resp, body, wrong)
	}
	return resp, p.whole(client, resp, body, wrong)
}

// whole relays a whole answer with its receipt in a header.
func (p *Proxy) whole(client net.Conn, resp *http.Response, body []byte, wrong bool) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody+1))
	if err != nil {
		return err
	}
	if len(data) > maxAnswerBody {
		return fmt.Errorf("answer over %d bytes", maxAnswerBody)
	}
	if wrong {
		data = falsify(data, "message")
	}
	var o Outputs
	h := resp.Header.Clone()
	h.Del(Header)
	if err := o.Add(data); err == nil {
		h.Set(Header, p.sign(body, &o))
	} else if p.Log != nil {
		p.Log.Warn("receipt: the replica's answer is not a chat completion; no receipt", "service", p.Service, "err", err)
	}
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	var w bytes.Buffer
	fmt.Fprintf(&w, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	h.Write(&w)
	w.WriteString("\r\n")
	w.Write(data)
	_, err = client.Write(w.Bytes())
	return err
}

// stream relays an event stream event by event, as chunks, with the
// receipt in a trailer.
func (p *Proxy) stream(client net.Conn, resp *http.Response, body []byte, wrong bool) error {
	h := resp.Header.Clone()
	h.Del(Header)
	h.Del("Content-Length")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Trailer", Header)
	var w bytes.Buffer
	fmt.Fprintf(&w, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	h.Write(&w)
	w.WriteString("\r\n")
	if _, err := client.Write(w.Bytes()); err != nil {
		return err
	}
	var o Outputs
	ok := true
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var event bytes.Buffer
	flush := func() error {
		if event.Len() == 0 {
			return nil
		}
		_, err := fmt.Fprintf(client, "%x\r\n%s\r\n", event.Len(), event.Bytes())
		event.Reset()
		return err
	}
	for {
		line, err := readLine(rd)
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("an event line over %d bytes", maxEventLine)
		}
		if len(line) > 0 {
			if data, isData := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); isData {
				data = bytes.TrimPrefix(data, []byte(" "))
				if !bytes.Equal(data, []byte("[DONE]")) {
					if wrong {
						data = falsify(data, "delta")
						line = append(append([]byte("data: "), data...), '\n')
					}
					if ok && o.Add(data) != nil {
						ok = false
					}
				}
			}
			event.Write(line)
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return err
			}
			break
		}
	}
	if err := flush(); err != nil {
		return err
	}
	trailer := ""
	if ok {
		trailer = Header + ": " + p.sign(body, &o) + "\r\n"
	}
	_, err := fmt.Fprintf(client, "0\r\n%s\r\n", trailer)
	return err
}

// sign is the encoded receipt of an answer with outputs o to body.
func (p *Proxy) sign(body []byte, o *Outputs) string {
	pub := p.Signer.Key.Public().(ed25519.PublicKey)
	r := New(p.Service, address.FromPubKey(pub), body, o, p.Signer.now().UnixMilli())
	r.Sign(p.Signer.ChainID, p.Signer.Key)
	return Encode(r)
}

// falsify changes the text of each choice of a completion (part
// "message") or chunk ("delta"): what a faulty replica answers.
func falsify(data []byte, part string) []byte {
	var a map[string]any
	if json.Unmarshal(data, &a) != nil {
		return data
	}
	cs, _ := a["choices"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if inner, _ := m[part].(map[string]any); inner != nil {
			if s, ok := inner["content"].(string); ok && s != "" {
				inner["content"] = strings.ToUpper(s) + "!"
			}
		}
	}
	out, err := json.Marshal(a)
	if err != nil {
		return data
	}
	return out
}

// splice copies both ways until either side ends; what the readers
// buffered goes first.
func splice(client net.Conn, cr io.Reader, back net.Conn, br io.Reader) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(back, cr)
		closeWrite(back)
	}()
	go func() {
		defer wg.Done()
		io.Copy(client, br)
		closeWrite(client)
	}()
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// readLine reads one line with its ending (none at the end of the
// stream), at most maxEventLine bytes.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := rd.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxEventLine {
			return nil, bufio.ErrBufferFull
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
