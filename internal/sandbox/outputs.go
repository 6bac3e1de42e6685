package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Errors an OutputError wraps, for callers that need to tell them apart.
var (
	ErrOutputPath     = errors.New("invalid output path")
	ErrOutputMissing  = errors.New("missing")
	ErrOutputSymlink  = errors.New("is a symbolic link")
	ErrOutputEscapes  = errors.New("escapes the work dir")
	ErrOutputTooLarge = errors.New("outputs exceed the disk limit")
	ErrOutputTooMany  = errors.New("outputs hold too many files and directories")
)

// Output budgets beyond bytes. A job's outputs are packed into one archive
// that the consumer downloads and unpacks, so their count is bounded as
// well as their size: without it 200,000 empty files passed a 1 MiB limit,
// and the consumer paid for outputs that `job get` then refused to unpack.
const (
	// MaxOutputEntries is the most files and directories (the directories
	// that hold the declared outputs included) a job's outputs may have:
	// what a consumer unpacks (seal.DefaultMaxEntries).
	MaxOutputEntries = 100_000
	// OutputEntryBytes is what each file or directory costs against the
	// disk limit besides its contents: the header it takes in the output
	// archive (one tar block), and at least that on the provider's disk.
	OutputEntryBytes = 512
)

// maxOutputEntries is MaxOutputEntries; tests lower it.
var maxOutputEntries = MaxOutputEntries

// OutputError is a problem with a declared output that is the job's doing
// (it did not write it, wrote a symbolic link, wrote too much). Executors
// turn it into a failed Result whose Reason is its message; any other error
// from CollectOutputs is the provider's.
type OutputError struct {
	Path string // the guest path, as declared or as found under it
	Err  error  // one of the ErrOutput… values, possibly wrapped
}

func (e *OutputError) Error() string {
	if errors.Is(e.Err, ErrOutputMissing) {
		return "output " + e.Path + " missing"
	}
	return "output " + e.Path + ": " + e.Err.Error()
}

func (e *OutputError) Unwrap() error { return e.Err }

// maxGuestPath bounds the length of a guest path; Linux's PATH_MAX.
const maxGuestPath = 4096

// CleanGuestPath checks a guest path from a job spec and returns it in
// canonical form. It must be absolute ("/out"), must not contain a ".."
// element, a NUL byte or a backslash, and is returned cleaned ("//out/./x/"
// becomes "/out/x"). "/" means the whole work directory. The checks are
// lexical; CollectOutputs also refuses paths that leave the work directory
// through symbolic links.
func CleanGuestPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty", ErrOutputPath)
	case len(p) > maxGuestPath:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrOutputPath, maxGuestPath)
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q is not absolute", ErrOutputPath, p)
	case strings.ContainsAny(p, "\x00\\"):
		return "", fmt.Errorf("%w: %q contains a NUL byte or a backslash", ErrOutputPath, p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrOutputPath, p)
		}
	}
	return path.Clean(p), nil
}

// CollectOutputs collects the declared outputs of a job out of workDir
// into dst, each at its guest path (the guest's "/out/a.txt" becomes
// dst/out/a.txt); dst is created if needed. Outputs may be files or
// directories; an output nested in another is collected once. A file is
// hard-linked into dst when it is the job's own (no other name) and dst is
// on the same file system, else copied; either way it gets mode 0755 if
// any execute bit was set, 0644 otherwise (a linked file's mode changes in
// workDir too). It must be called once the job's processes are gone, and
// the files left in workDir must not be written while dst is in use (they
// may be the collected ones): a job restarted in place from a checkpoint
// starts after its last outputs were removed.
//
// It is safe against a hostile job: paths go through CleanGuestPath and are
// resolved inside workDir with an os.Root, so neither ".." nor a symbolic
// link can make it read outside; a declared output that is a symbolic link
// is refused, and symbolic links, devices, pipes and sockets inside an
// output directory are skipped. maxBytes, if not 0, bounds the total size of
// the files collected plus OutputEntryBytes for each file and directory,
// checked as they are collected; at most MaxOutputEntries files and
// directories are collected whatever maxBytes is (ErrOutputTooMany).
//
// Problems that are the job's doing are returned as an *OutputError (the
// first one met; what was copied before it stays in dst). Other errors are
// the provider's.
func CollectOutputs(workDir string, outputs []string, dst string, maxBytes uint64) error {
	cleaned := make([]string, 0, len(outputs))
	for _, o := range outputs {
		c, err := CleanGuestPath(o)
		if err != nil {
			return &OutputError{Path: o, Err: err}
		}
		cleaned = append(cleaned, c)
	}
	cleaned = outermost(cleaned)

	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return fmt.Errorf("open work dir: %w", err)
	}
	defer root.Close()

	c := &collector{root: root, dst: dst, limit: maxBytes, parents: map[string]bool{}}
	for _, p := range cleaned {
		rel := strings.TrimPrefix(p, "/")
		if rel == "" {
			rel = "."
		}
		// The directories that will hold the output are entries too.
		for d := path.Dir(rel); d != "." && !c.parents[d]; d = path.Dir(d) {
			c.parents[d] = true
			if err := c.entry(d); err != nil {
				return err
			}
		}
		st, err := root.Lstat(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &OutputError{Path: p, Err: ErrOutputMissing}
		case err != nil:
			// os.Root refuses components that are symbolic links leading
			// out of the root; that, or an unreadable path, is the job's.
			return &OutputError{Path: p, Err: fmt.Errorf("%w: %v", ErrOutputEscapes, err)}
		case st.Mode()&fs.ModeSymlink != 0:
			return &OutputError{Path: p, Err: ErrOutputSymlink}
		}
		if err := c.copy(rel, st); err != nil {
			return err
		}
	}
	return nil
}

// outermost sorts paths and drops those inside another one.
func outermost(paths []string) []string {
	sort.Strings(paths)
	var out []string
	for _, p := range paths {
		if n := len(out); n > 0 {
			last := out[n-1]
			if p == last || last == "/" || strings.HasPrefix(p, last+"/") {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

type collector struct {
	root    *os.Root
	dst     string
	limit   uint64 // 0: none
	used    uint64
	entries int
	parents map[string]bool // directories above the declared outputs, counted
}

// entry counts one file or directory, rel, against the budgets.
func (c *collector) entry(rel string) error {
	c.entries++
	if c.entries > maxOutputEntries {
		return &OutputError{Path: guestPath(rel), Err: fmt.Errorf("%w (more than %d)", ErrOutputTooMany, maxOutputEntries)}
	}
	if c.limit > 0 {
		c.used += OutputEntryBytes
		if c.used > c.limit {
			return &OutputError{Path: guestPath(rel), Err: fmt.Errorf("%w of %s (%d files and directories count %d B each)", ErrOutputTooLarge, FormatBytes(c.limit), c.entries, OutputEntryBytes)}
		}
	}
	return nil
}

// copy copies rel (already Lstat'ed as st) from the root into dst.
func (c *collector) copy(rel string, st fs.FileInfo) error {
	target := filepath.Join(c.dst, filepath.FromSlash(rel))
	if (st.IsDir() || st.Mode().IsRegular()) && rel != "." {
		if err := c.entry(rel); err != nil {
			return err
		}
	}
	switch {
	case st.IsDir():
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
		d, err := c.root.Open(rel)
		if err != nil {
			return &OutputError{Path: guestPath(rel), Err: err}
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return &OutputError{Path: guestPath(rel), Err: err}
		}
		// Name order, so that which file trips a limit does not depend on
		// the host file system.
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range entries {
			if !e.Type().IsDir() && !e.Type().IsRegular() {
				continue // symbolic links, devices, pipes, sockets
			}
			child := path.Join(rel, e.Name())
			info, err := c.root.Lstat(child)
			if err != nil {
				return &OutputError{Path: guestPath(child), Err: err}
			}
			if err := c.copy(child, info); err != nil {
				return err
			}
		}
		return nil
	case st.Mode().IsRegular():
		return c.copyFile(rel, st, target)
	default:
		return nil
	}
}

// copyFile collects the regular file rel (Lstat'ed as st) at target: a hard
// link to it where that is safe and possible, else a copy.
func (c *collector) copyFile(rel string, st fs.FileInfo, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	src, err := c.root.Open(rel)
	if err != nil {
		return &OutputError{Path: guestPath(rel), Err: err}
	}
	defer src.Close()
	mode := fs.FileMode(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	if linkOutputs {
		switch done, err := c.link(rel, src, target, mode); {
		case err != nil:
			return err
		case done:
			return nil
		}
	}
	out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("create output file: %w", err)
	}
	var r io.Reader = src
	if c.limit > 0 {
		// Read one byte more than allowed to notice a file that grew.
		r = io.LimitReader(src, int64(min(c.limit-c.used+1, 1<<62)))
	}
	n, err := io.Copy(out, r)
	c.used += uint64(n)
	if cerr := out.Close(); err == nil && cerr != nil {
		return fmt.Errorf("write output file: %w", cerr)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Op == "write" {
			return fmt.Errorf("write output file: %w", err)
		}
		return &OutputError{Path: guestPath(rel), Err: err}
	}
	if c.limit > 0 && c.used > c.limit {
		return &OutputError{Path: guestPath(rel), Err: fmt.Errorf("%w of %s", ErrOutputTooLarge, FormatBytes(c.limit))}
	}
	return nil
}

// linkOutputs turns hard-linking off (tests and benchmarks compare it
// with the copy).
var linkOutputs = true

// link collects the file open as src (rel in the work dir) at target as a
// hard link to the same inode, in O(1) whatever its size, and gives it the
// mode a copy would have. It does so only where nothing but the provider
// can reach the inode afterwards, and says false (nothing done: copy it)
// otherwise:
//
//   - the inode has no other name (one link), so it is the job's own file
//     and not one a link shares with something outside the work dir, whose
//     contents or mode the provider must never touch; an output with more
//     names is copied, as every output was before;
//   - the inode is the one opened (linked through the open descriptor, not
//     by path, so no rename in between can swap it);
//   - the link and the chmod succeed: across file systems, without /proc,
//     or for a file of another user that the kernel's protected_hardlinks
//     rule keeps us from linking or that we cannot chmod, it is a copy.
//
// Finish collects after the job's processes are gone (executors return
// from run only then), so the file cannot grow or change after its size is
// counted; the size counts against the budget exactly as a copy's bytes
// would, and a file over the budget fails the same way, without a link.
func (c *collector) link(rel string, src *os.File, target string, mode fs.FileMode) (bool, error) {
	fi, err := src.Stat()
	if err != nil {
		return false, &OutputError{Path: guestPath(rel), Err: err}
	}
	if !fi.Mode().IsRegular() || linkCount(fi) != 1 {
		return false, nil
	}
	size := uint64(fi.Size())
	if c.limit > 0 && size > c.limit-c.used {
		c.used = c.limit + 1
		return false, &OutputError{Path: guestPath(rel), Err: fmt.Errorf("%w of %s", ErrOutputTooLarge, FormatBytes(c.limit))}
	}
	if !linkOpenFile(src, target) {
		return false, nil
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != mode {
		if err := os.Chmod(target, mode); err != nil {
			os.Remove(target)
			return false, nil
		}
	}
	c.used += size
	return true, nil
}

func guestPath(rel string) string {
	if rel == "." {
		return "/"
	}
	return "/" + rel
}

// Finish ends a run the way every executor must: it collects job.Outputs
// into a new directory beside job.WorkDir, records it in res.OutputDir, and
// turns a clean exit whose outputs are missing or too large into a failure
// whose Reason names the output. It sets res.Finished. An error is the
// provider's; res.OutputDir is then empty and nothing is left behind.
func Finish(job *Job, res *Result) error {
	work := filepath.Clean(job.WorkDir)
	dir, err := os.MkdirTemp(filepath.Dir(work), filepath.Base(work)+".out-")
	if err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	err = CollectOutputs(work, job.Outputs, dir, job.Limits.Disk())
	var oe *OutputError
	switch {
	case errors.As(err, &oe):
		if !res.Failed {
			res.Failed = true
			res.Reason = oe.Error()
		}
	case err != nil:
		os.RemoveAll(dir)
		return err
	}
	res.OutputDir = dir
	res.Finished = time.Now()
	return nil
}
