package wasi

import "encoding/binary"

// Memory is the guest's linear memory, as the engine hands it to a host
// call: a view of the bytes themselves, valid until the guest runs again
// (a memory.grow may move it).
type Memory []byte

// maxIovecs bounds an iovec array (Linux's IOV_MAX is 1024).
const maxIovecs = 1 << 16

// fault is panicked by Memory's accessors on an access out of bounds; the
// call recovers it and returns EFAULT.
type fault struct{}

func (m Memory) slice(p, n uint32) []byte {
	end := uint64(p) + uint64(n)
	if end > uint64(len(m)) {
		panic(fault{})
	}
	return m[p:end]
}

func (m Memory) u16(p uint32) uint16       { return binary.LittleEndian.Uint16(m.slice(p, 2)) }
func (m Memory) u32(p uint32) uint32       { return binary.LittleEndian.Uint32(m.slice(p, 4)) }
func (m Memory) u64(p uint32) uint64       { return binary.LittleEndian.Uint64(m.slice(p, 8)) }
func (m Memory) putU8(p uint32, v uint8)   { m.slice(p, 1)[0] = v }
func (m Memory) putU16(p uint32, v uint16) { binary.LittleEndian.PutUint16(m.slice(p, 2), v) }
func (m Memory) putU32(p uint32, v uint32) { binary.LittleEndian.PutUint32(m.slice(p, 4), v) }
func (m Memory) putU64(p uint32, v uint64) { binary.LittleEndian.PutUint64(m.slice(p, 8), v) }

// str reads a guest string (not NUL-terminated: preview1 passes lengths).
func (m Memory) str(p, n uint32) string { return string(m.slice(p, n)) }

// iovecs reads an array of n iovecs (ciovecs) at p as views into m.
func (m Memory) iovecs(p, n uint32) [][]byte {
	if n > maxIovecs {
		panic(fault{})
	}
	raw := m.slice(p, n*sizeofIovec)
	out := make([][]byte, n)
	for i := range out {
		b := raw[i*sizeofIovec:]
		out[i] = m.slice(binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]))
	}
	return out
}
