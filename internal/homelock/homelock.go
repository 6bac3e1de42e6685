// Package homelock keeps one gpunet process at a time running what a home
// holds (a devnet, a node): a lock file in the home, locked with flock for
// as long as the process runs, holding its pid and command. A second
// process is refused before it writes anything in the home, with an error
// that names the first and says how to stop it.
//
// The lock is the kernel's, not the file's existence: it goes with the
// process however it ends (kill -9 included), so a stale file never keeps
// a home locked, and the file is left in place when the lock is released.
package homelock

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// File is the lock file's name in a home.
const File = "gpunet.lock"

// Lock is a home's lock, held by this process until Release.
type Lock struct {
	f *os.File // the lock file, open: closing it releases the flock
}

// HeldError is Acquire finding the home's lock held by another process.
type HeldError struct {
	Home string
	// PID, Command and Since are what the holder wrote in the lock file;
	// PID is 0 when it could not be read (the holder had not written it
	// yet).
	PID     int
	Command string
	Since   time.Time
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%s is in use by another gpunet process (it holds %s); stop it first, or use another --home", e.Home, filepath.Join(e.Home, File))
	}
	who := e.Command
	if who == "" {
		who = "a gpunet process"
	}
	since := ""
	if !e.Since.IsZero() {
		since = ", since " + e.Since.Local().Format(time.DateTime)
	}
	return fmt.Sprintf("%s is in use by %s (pid %d%s); stop it first (Ctrl-C in its terminal, or kill %d), or use another --home", e.Home, who, e.PID, since, e.PID)
}

// Acquire takes home's lock for this process, which runs command (e.g.
// "gpunet devnet"): call it before writing anything there. When another
// process holds the lock it returns a *HeldError and leaves the home as it
// was (it creates the lock file only when there is none). A home that does
// not exist is an error wrapping fs.ErrNotExist.
func Acquire(home, command string) (*Lock, error) {
	if st, err := os.Stat(home); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("home %s: %w", home, fs.ErrNotExist)
		}
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("home %s is not a directory", home)
	}
	path := filepath.Join(home, File)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if held {
		e := &HeldError{Home: home}
		// The holder writes its pid just after it takes the lock: give
		// it a moment.
		for try := 0; try < 20 && e.PID == 0; try++ {
			if try > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			e.PID, e.Command, e.Since = parse(f)
		}
		f.Close()
		return nil, e
	}
	if err := write(f, command); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release unlocks the home. The lock file stays; what it says no longer
// counts once no process holds its lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file releases the flock
	l.f = nil
	return err
}

// write replaces the lock file's content with this process's pid, command
// and start.
func write(f *os.File, command string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	s := fmt.Sprintf("pid %d\ncommand %s\nsince %s\n", os.Getpid(), command, time.Now().UTC().Format(time.RFC3339))
	if _, err := f.WriteAt([]byte(s), 0); err != nil {
		return err
	}
	return f.Sync()
}

// parse reads what write wrote; zero values for what is missing.
func parse(f *os.File) (pid int, command string, since time.Time) {
	if _, err := f.Seek(0, 0); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		switch key {
		case "pid":
			pid, _ = strconv.Atoi(val)
		case "command":
			command = val
		case "since":
			since, _ = time.Parse(time.RFC3339, val)
		}
	}
	return
}
