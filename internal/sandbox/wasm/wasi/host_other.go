//go:build !unix

package wasi

import (
	"hash/fnv"
	"os"
)

// fileID identifies a host file; here, without inode numbers, by name and
// size, which is only good enough to number what a listing shows.
type fileID struct{ dev, ino uint64 }

// hostIDsUnique: two files may share a fileID here.
const hostIDsUnique = false

func hostID(fi os.FileInfo) (fileID, bool) {
	h := fnv.New64a()
	h.Write([]byte(fi.Name()))
	return fileID{0, h.Sum64()}, true
}

func hostStat(fi os.FileInfo) (dev, ino, nlink uint64, atim, mtim, ctim int64) {
	t := fi.ModTime().UnixNano()
	return 0, 0, 1, t, t, t
}

func hostErrno(error) (Errno, bool) { return 0, false }
