package ledger

import (
	"encoding/binary"
	"testing"
)

// TestLtHashLanes checks the packed lane arithmetic against plain uint16
// lanes, including every carry and borrow at a lane's edge.
func TestLtHashLanes(t *testing.T) {
	var h LtHash
	var lanes [ltLanes]uint16
	entries := [][2]string{{"a", "1"}, {"b", "2"}, {"a", "1"}, {"c", ""}, {"", "x"}}
	for step, e := range entries {
		buf := *new(ltHasher).stream([]byte(e[0]), []byte(e[1]))
		if step%2 == 0 {
			h.Add([]byte(e[0]), []byte(e[1]))
			for i := range lanes {
				lanes[i] += binary.LittleEndian.Uint16(buf[2*i:])
			}
		} else {
			h.Remove([]byte(e[0]), []byte(e[1]))
			for i := range lanes {
				lanes[i] -= binary.LittleEndian.Uint16(buf[2*i:])
			}
		}
		b := h.Bytes()
		for i, want := range lanes {
			if got := binary.LittleEndian.Uint16(b[2*i:]); got != want {
				t.Fatalf("step %d lane %d = %#x, want %#x", step, i, got, want)
			}
		}
	}
	// Adding then removing the same entry is the identity.
	var z LtHash
	z.Add([]byte("k"), []byte("v"))
	z.Remove([]byte("k"), []byte("v"))
	if z != (LtHash{}) {
		t.Fatal("add then remove left a residue")
	}
	// Extreme lanes: 0xffff + 1 wraps to 0, 0 - 1 wraps to 0xffff.
	a, one := uint64(0xffff_0000_ffff_0000), uint64(0x0001_0001_0001_0001)
	if got := ((a &^ ltHigh) + (one &^ ltHigh)) ^ ((a ^ one) & ltHigh); got != 0x0000_0001_0000_0001 {
		t.Fatalf("wrapping add = %#x", got)
	}
	if got := ((a | ltHigh) - (one &^ ltHigh)) ^ ((a ^ ^one) & ltHigh); got != 0xfffe_ffff_fffe_ffff {
		t.Fatalf("wrapping sub = %#x", got)
	}
}

func BenchmarkLtHashAdd(b *testing.B) {
	var h LtHash
	k, v := []byte("prov/0123456789abcdef0123"), make([]byte, 600)
	for b.Loop() {
		h.Add(k, v)
	}
}

// BenchmarkLtHashAddReused is how a block folds in its changes: one
// hasher for all of them.
func BenchmarkLtHashAddReused(b *testing.B) {
	var h LtHash
	var x ltHasher
	k, v := []byte("prov/0123456789abcdef0123"), make([]byte, 600)
	for b.Loop() {
		h.add(&x, k, v)
	}
}
