package clusternet

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

func TestStreamRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeStreamHeader(w, 2); err != nil {
		t.Fatal(err)
	}
	packets := [][]byte{{1}, bytes.Repeat([]byte{7}, 1452), bytes.Repeat([]byte{9}, MaxPacket)}
	for _, p := range packets {
		if err := writeFrame(w, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFrame(w, nil); err == nil {
		t.Error("writeFrame accepted an empty packet")
	}
	if err := writeFrame(w, make([]byte, MaxPacket+1)); err == nil {
		t.Error("writeFrame accepted a packet over MaxPacket")
	}
	w.Flush()
	r := bufio.NewReader(&buf)
	rank, err := readStreamHeader(r, 3)
	if err != nil || rank != 2 {
		t.Fatalf("header: rank %d, %v; want 2", rank, err)
	}
	in := make([]byte, MaxPacket)
	for i, p := range packets {
		n, err := readFrame(r, in)
		if err != nil || !bytes.Equal(in[:n], p) {
			t.Fatalf("frame %d: %d bytes, %v", i, n, err)
		}
	}
	if _, err := readFrame(r, in); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}

func TestStreamHeaderErrors(t *testing.T) {
	for in, want := range map[string]string{
		"GWG1\x00\x03": "rank 3: the gang has 3 members",
		"XWG1\x00\x00": "begins with",
		"GWG":          "header",
	} {
		_, err := readStreamHeader(strings.NewReader(in), 3)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", in, err, want)
		}
	}
	in := make([]byte, MaxPacket)
	if _, err := readFrame(bufio.NewReader(strings.NewReader("\x00\x00")), in); !errors.Is(err, errEmptyFrame) {
		t.Errorf("empty frame: %v", err)
	}
	if _, err := readFrame(bufio.NewReader(strings.NewReader("\x00\x05ab")), in); err != io.ErrUnexpectedEOF {
		t.Errorf("short frame: %v", err)
	}
}

// TestServeStreamRefuses: a stream claiming this member's own rank, or a
// rank the gang does not have, is closed without a packet delivered.
func TestServeStreamRefuses(t *testing.T) {
	b, err := newBind(testConfig(t, 3, 1), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.shutdown()
	for _, hdr := range []string{"GWG1\x00\x01", "GWG1\x00\x09", "HTTP/1.1 200"} {
		a, c := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- b.serveStream(c, -1) }()
		a.SetDeadline(time.Now().Add(5 * time.Second))
		a.Write([]byte(hdr))
		a.Write([]byte("\x00\x01x"))
		if err := <-done; err == nil {
			t.Errorf("header %q: served", hdr)
		}
		a.Close()
	}
	// A stream the relay vouches comes from rank 0 whose header claims
	// rank 2.
	a, c := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- b.serveStream(c, 0) }()
	a.SetDeadline(time.Now().Add(5 * time.Second))
	a.Write([]byte("GWG1\x00\x02"))
	a.Write([]byte("\x00\x01x"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the relay says it comes from rank 0") {
		t.Errorf("a header claiming another rank than the relay's: %v", err)
	}
	a.Close()
	if len(b.recv) != 0 {
		t.Errorf("%d packets delivered from refused streams", len(b.recv))
	}
}

// TestServeStreamDelivers: packets of a stream from rank 2 reach the
// receive function tagged with rank 2's endpoint; a second stream from the
// same rank replaces the first.
func TestServeStreamDelivers(t *testing.T) {
	b, err := newBind(testConfig(t, 3, 0), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.shutdown()
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	relayRecv := fns[len(fns)-1]
	send := func(pkts ...string) (net.Conn, chan error) {
		a, c := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- b.serveStream(c, -1) }()
		go func() {
			w := bufio.NewWriter(a)
			writeStreamHeader(w, 2)
			for _, p := range pkts {
				writeFrame(w, []byte(p))
			}
			w.Flush()
		}()
		return a, done
	}
	first, done1 := send("one", "two")
	defer first.Close()
	packets := [][]byte{make([]byte, 100), make([]byte, 100)}
	sizes := make([]int, 2)
	eps := make([]conn.Endpoint, 2)
	got := ""
	for got != "onetwo" {
		n, err := relayRecv(packets, sizes, eps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if eps[i] != b.eps[2] {
				t.Fatalf("packet %q tagged %v, want rank 2's endpoint", packets[i][:sizes[i]], eps[i].DstToString())
			}
			got += string(packets[i][:sizes[i]])
		}
	}
	second, _ := send("three")
	defer second.Close()
	select {
	case <-done1:
	case <-time.After(5 * time.Second):
		t.Fatal("the first stream from rank 2 was not closed when a second came")
	}
	n, err := relayRecv(packets, sizes, eps)
	if err != nil || n != 1 || string(packets[0][:sizes[0]]) != "three" {
		t.Fatalf("second stream: %d packets, %v", n, err)
	}
	b.Close()
	if _, err := relayRecv(packets, sizes, eps); !errors.Is(err, net.ErrClosed) {
		t.Errorf("receive after Close: %v, want net.ErrClosed", err)
	}
}

func FuzzReadStream(f *testing.F) {
	var seed bytes.Buffer
	w := bufio.NewWriter(&seed)
	writeStreamHeader(w, 1)
	writeFrame(w, []byte("a packet"))
	w.Flush()
	f.Add(seed.Bytes())
	f.Add([]byte("GWG1\x00\x00\x00\x00"))
	f.Add([]byte("GWG1\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		rank, err := readStreamHeader(r, 4)
		if err != nil {
			return
		}
		if rank < 0 || rank >= 4 {
			t.Fatalf("rank %d accepted", rank)
		}
		buf := make([]byte, MaxPacket)
		total := 6
		for {
			n, err := readFrame(r, buf)
			if err != nil {
				break
			}
			if n < 1 || n > MaxPacket {
				t.Fatalf("frame of %d bytes", n)
			}
			total += 2 + n
			if total > len(data) {
				t.Fatalf("read %d bytes from %d", total, len(data))
			}
		}
	})
}
