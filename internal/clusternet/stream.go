package clusternet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A relay stream carries one member's WireGuard packets to another, in
// order, over any byte stream (a relay session's stream):
//
//	header: "GWG1" then the sender's rank, 2 bytes big-endian
//	frames: a packet's length, 2 bytes big-endian (1 … MaxPacket), then
//	        the packet
//
// The rank only says which peer's endpoint the packets are delivered
// with; it is not trusted: WireGuard authenticates every packet, and a
// packet that does not decrypt with that peer's session is dropped.
const streamMagic = "GWG1"

// MaxPacket is the largest packet a relay stream carries: a WireGuard
// message for the largest MTU Config allows.
const MaxPacket = 65535

// writeStreamHeader writes the stream's header for sender rank.
func writeStreamHeader(w io.Writer, rank int) error {
	var h [6]byte
	copy(h[:], streamMagic)
	binary.BigEndian.PutUint16(h[4:], uint16(rank))
	_, err := w.Write(h[:])
	return err
}

// readStreamHeader reads a stream's header and returns the sender's rank,
// which must be below members.
func readStreamHeader(r io.Reader, members int) (int, error) {
	var h [6]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, fmt.Errorf("clusternet: relay stream header: %w", err)
	}
	if string(h[:4]) != streamMagic {
		return 0, fmt.Errorf("clusternet: relay stream begins with %q, not %q", h[:4], streamMagic)
	}
	rank := int(binary.BigEndian.Uint16(h[4:]))
	if rank >= members {
		return 0, fmt.Errorf("clusternet: relay stream from rank %d: the gang has %d members", rank, members)
	}
	return rank, nil
}

// writeFrame buffers one packet's frame in w.
func writeFrame(w *bufio.Writer, p []byte) error {
	if len(p) == 0 || len(p) > MaxPacket {
		return fmt.Errorf("clusternet: packet of %d bytes: want 1 to %d", len(p), MaxPacket)
	}
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(p)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

var errEmptyFrame = errors.New("clusternet: relay stream frame of length 0")

// readFrame reads one frame into buf (at least MaxPacket bytes) and
// returns the packet's length.
func readFrame(r *bufio.Reader, buf []byte) (int, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n == 0 {
		return 0, errEmptyFrame
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return n, nil
}
