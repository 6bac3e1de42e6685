package wasi

import (
	"os"
	"path"
)

// maxCachedDirs bounds the directories System.at keeps open.
const maxCachedDirs = 64

// at is where s looks up rel, a path under Root: the os.Root of rel's
// directory and rel's last element, when rel is a plain clean path in a
// subdirectory; else Root and rel. The directories' os.Roots are kept
// open, so that path_open and path_filestat_get resolve "in/x" with one
// call in the directory, as open(2) and stat(2) would, rather than a walk
// from Root each time (os.Root opens and closes each directory on the
// way: three calls, for each of a job's thousands of input files). A
// directory renamed or removed can change what a path names, so
// pathRename and pathRemoveDirectory forget them all.
func (s *System) at(rel string) (*os.Root, string) {
	dir, name := path.Split(rel)
	if dir == "" || name == "" || path.Clean(rel) != rel {
		return s.root, rel
	}
	dir = dir[:len(dir)-1]
	r, ok := s.dirs[dir]
	if !ok {
		if len(s.dirs) >= maxCachedDirs {
			s.forgetDirs()
		}
		var err error
		if r, err = s.root.OpenRoot(dir); err != nil {
			return s.root, rel // and Root tells what is wrong
		}
		s.dirs[dir] = r
	}
	return r, name
}

// forgetDirs closes the directories at keeps open.
func (s *System) forgetDirs() {
	for d, r := range s.dirs {
		r.Close()
		delete(s.dirs, d)
	}
}
