package errorfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// ErrCrashed is what every call of a CrashFS returns after Crash: the
// machine is off.
var ErrCrashed = errors.New("errorfs: crashed")

// pageSize is the unit of what a crash keeps or loses of a file's
// unsynced writes.
const pageSize = 4096

// CrashFS is a vfs.FS (over another one, with real files) that records
// what is not yet durable, so that Crash can leave on disk what a power
// loss would:
//
//   - A file's data is durable up to its last fsync (File.Sync, or SyncFS
//     of its filesystem): the crash undoes every write and truncation
//     since, per file, keeping the synced contents.
//   - A file created since its directory was last fsynced (a Sync of the
//     directory opened as a file, or SyncFS) loses its name: the crash
//     removes it, unless it was renamed over a file that existed (the
//     rename replaced a durable name).
//   - Renames, removals and directory creations are taken as durable
//     when they return (a journaling filesystem commits them in order;
//     their loss is not modelled).
//
// With CrashOptions.Rand, the crash instead keeps a random part of what
// was not synced, as a disk that wrote back some dirty pages and not
// others would: each unsynced page of a file independently either reached
// the disk or did not (its old contents, or zeros past the synced end),
// the file's length is anywhere between its synced and current lengths,
// and a file created in an unsynced directory may keep its name.
//
// Files that existed before the CrashFS was made count as durable. Safe
// for concurrent use: calls are serialized.
type CrashFS struct {
	inner vfs.FS

	mu      sync.Mutex
	crashed bool
	files   map[string]*fileState // by path, files written or created since their last sync
	locks   []io.Closer           // taken by Lock, released by Crash
}

// fileState is what a crash needs to undo the unsynced changes of one
// file.
type fileState struct {
	path      string
	synced    int64            // length at the last sync
	pages     map[int64][]byte // synced contents of pages changed since, by page number (within synced)
	newName   bool             // created (or renamed to a new name) since its directory's last sync
	dataDirty bool             // written or truncated since its last sync
}

// NewCrashFS returns a CrashFS over inner (nil: vfs.Default).
func NewCrashFS(inner vfs.FS) *CrashFS {
	if inner == nil {
		inner = vfs.Default
	}
	return &CrashFS{inner: inner, files: map[string]*fileState{}}
}

// CrashOptions say what a crash keeps of the unsynced writes.
type CrashOptions struct {
	// Rand, when set, keeps a random part of them (see CrashFS); nil
	// drops them all.
	Rand *rand.Rand
}

// Crash stops the machine: every later call of the FS, and of the files
// it opened, fails with ErrCrashed, and the files on disk are left as a
// power loss at this instant would leave them. It returns the first error
// restoring them, and ErrCrashed when already crashed.
func (c *CrashFS) Crash(opts CrashOptions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return ErrCrashed
	}
	c.crashed = true
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // reproducible with a seeded Rand
	var errs []error
	for _, p := range paths {
		if err := c.restore(c.files[p], opts.Rand); err != nil {
			errs = append(errs, fmt.Errorf("errorfs: crash %s: %w", p, err))
		}
	}
	c.files = nil
	for _, l := range c.locks {
		l.Close() // the process ended: the kernel drops its locks
	}
	c.locks = nil
	return errors.Join(errs...)
}

// Unsynced reports how many files have changes a crash would undo now.
func (c *CrashFS) Unsynced() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.files)
}

func (c *CrashFS) restore(st *fileState, rng *rand.Rand) error {
	if st.newName && (rng == nil || rng.IntN(2) == 0) {
		err := c.inner.Remove(st.path)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return err
	}
	if !st.dataDirty {
		return nil
	}
	f, err := c.inner.OpenFile(st.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	cur := fi.Size()
	length := st.synced
	if rng != nil {
		lo, hi := min(cur, st.synced), max(cur, st.synced)
		length = lo + rng.Int64N(hi-lo+1)
	}
	// Pages changed within the synced length go back to their synced
	// contents (or, at random, keep the new ones).
	for pg, old := range st.pages {
		if rng != nil && rng.IntN(2) == 0 {
			continue
		}
		if _, err := f.WriteAt(old, pg*pageSize); err != nil {
			return err
		}
	}
	if rng != nil {
		// Pages past the synced length: written back or not.
		zeros := make([]byte, pageSize)
		for pg := st.synced / pageSize; pg*pageSize < length; pg++ {
			start := max(pg*pageSize, st.synced)
			end := min((pg+1)*pageSize, length)
			if start < end && rng.IntN(2) == 0 {
				if _, err := f.WriteAt(zeros[:end-start], start); err != nil {
					return err
				}
			}
		}
	}
	return f.Truncate(length)
}

// dirtyLocked returns the state of path, making one when the file has no
// unsynced changes yet.
func (c *CrashFS) dirtyLocked(path string) (*fileState, error) {
	if st, ok := c.files[path]; ok {
		return st, nil
	}
	fi, err := c.inner.Stat(path)
	if err != nil {
		return nil, err
	}
	st := &fileState{path: path, synced: fi.Size(), pages: map[int64][]byte{}}
	c.files[path] = st
	return st, nil
}

// saveLocked records the synced contents of the bytes [from, to) of st's
// file before they change.
func (c *CrashFS) saveLocked(st *fileState, from, to int64) error {
	to = min(to, st.synced)
	if from >= to {
		return nil
	}
	var r vfs.File
	for pg := from / pageSize; pg*pageSize < to; pg++ {
		if _, ok := st.pages[pg]; ok {
			continue
		}
		if r == nil {
			var err error
			if r, err = c.inner.OpenFile(st.path, os.O_RDONLY, 0); err != nil {
				return err
			}
			defer r.Close()
		}
		n := min(pageSize, st.synced-pg*pageSize)
		b := make([]byte, n)
		if _, err := r.ReadAt(b, pg*pageSize); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		st.pages[pg] = b
	}
	return nil
}

// syncedLocked marks path's data durable.
func (c *CrashFS) syncedLocked(path string) {
	st, ok := c.files[path]
	if !ok {
		return
	}
	if !st.newName {
		delete(c.files, path)
		return
	}
	fi, err := c.inner.Stat(path)
	if err == nil {
		st.synced = fi.Size()
	}
	st.pages = map[int64][]byte{}
	st.dataDirty = false
}

// dirSyncedLocked marks the names of the files of dir durable; with all,
// the files' data too (SyncFS).
func (c *CrashFS) dirSyncedLocked(dir string, all bool) {
	dir = filepath.Clean(dir)
	for p, st := range c.files {
		in := filepath.Dir(p) == dir
		if all {
			in = p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
		}
		if !in {
			continue
		}
		st.newName = false
		if all || !st.dataDirty {
			delete(c.files, p)
		}
	}
}

// OpenFile implements vfs.FS.
func (c *CrashFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	name = filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrCrashed}
	}
	var existed bool
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		_, err := c.inner.Stat(name)
		existed = err == nil
	}
	if flag&os.O_TRUNC != 0 && existed {
		st, err := c.dirtyLocked(name)
		if err != nil {
			return nil, err
		}
		if err := c.saveLocked(st, 0, st.synced); err != nil {
			return nil, err
		}
		st.dataDirty = true
	}
	f, err := c.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 && !existed {
		st := &fileState{path: name, pages: map[int64][]byte{}, newName: true}
		c.files[name] = st
	}
	isDir := false
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			isDir = true
		}
	}
	return &crashFile{c: c, f: f, path: name, isDir: isDir, appending: flag&os.O_APPEND != 0}, nil
}

// Rename implements vfs.FS.
func (c *CrashFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: ErrCrashed}
	}
	_, err := c.inner.Stat(newpath)
	replaced := err == nil
	if err := c.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	// Whatever was tracked under newpath is gone.
	delete(c.files, newpath)
	for p, st := range c.files {
		switch {
		case p == oldpath:
			delete(c.files, p)
			st.path = newpath
			if replaced {
				st.newName = false
			} else if filepath.Dir(oldpath) != filepath.Dir(newpath) {
				st.newName = true
			}
			if st.newName || st.dataDirty {
				c.files[newpath] = st
			}
		case strings.HasPrefix(p, oldpath+string(filepath.Separator)):
			// A directory renamed: its files move with it.
			delete(c.files, p)
			st.path = newpath + strings.TrimPrefix(p, oldpath)
			c.files[st.path] = st
		}
	}
	if !replaced && c.files[newpath] == nil {
		if fi, err := c.inner.Stat(newpath); err == nil && !fi.IsDir() {
			// A durable file under a name not yet durable.
			c.files[newpath] = &fileState{path: newpath, synced: fi.Size(), pages: map[int64][]byte{}, newName: true}
		}
	}
	return nil
}

// Remove implements vfs.FS.
func (c *CrashFS) Remove(name string) error {
	name = filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "remove", Path: name, Err: ErrCrashed}
	}
	if err := c.inner.Remove(name); err != nil {
		return err
	}
	delete(c.files, name)
	return nil
}

// RemoveAll implements vfs.FS.
func (c *CrashFS) RemoveAll(path string) error {
	path = filepath.Clean(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "removeall", Path: path, Err: ErrCrashed}
	}
	if err := c.inner.RemoveAll(path); err != nil {
		return err
	}
	for p := range c.files {
		if p == path || strings.HasPrefix(p, path+string(filepath.Separator)) {
			delete(c.files, p)
		}
	}
	return nil
}

// MkdirAll implements vfs.FS.
func (c *CrashFS) MkdirAll(path string, perm fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "mkdir", Path: path, Err: ErrCrashed}
	}
	return c.inner.MkdirAll(path, perm)
}

// ReadDir implements vfs.FS.
func (c *CrashFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: ErrCrashed}
	}
	return c.inner.ReadDir(name)
}

// Stat implements vfs.FS.
func (c *CrashFS) Stat(name string) (fs.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: ErrCrashed}
	}
	return c.inner.Stat(name)
}

// Truncate implements vfs.FS.
func (c *CrashFS) Truncate(name string, size int64) error {
	name = filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "truncate", Path: name, Err: ErrCrashed}
	}
	if err := c.truncateLocked(name, size); err != nil {
		return err
	}
	return c.inner.Truncate(name, size)
}

func (c *CrashFS) truncateLocked(name string, size int64) error {
	st, err := c.dirtyLocked(name)
	if err != nil {
		return err
	}
	if err := c.saveLocked(st, size, st.synced); err != nil {
		return err
	}
	st.dataDirty = true
	return nil
}

// Chtimes implements vfs.FS.
func (c *CrashFS) Chtimes(name string, atime, mtime time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "chtimes", Path: name, Err: ErrCrashed}
	}
	return c.inner.Chtimes(name, atime, mtime)
}

// Lock implements vfs.FS. Crash releases the locks taken through c, as
// the end of a process does, so that a node restarted in the same test
// process after a crash can lock its dirs again.
func (c *CrashFS) Lock(name string) (io.Closer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrCrashed}
	}
	l, err := c.inner.Lock(name)
	if err != nil {
		return nil, err
	}
	c.locks = append(c.locks, l)
	return l, nil
}

// SyncFS implements vfs.FS: every file under dir becomes durable (the
// tracking is per path prefix, not per device).
func (c *CrashFS) SyncFS(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return &fs.PathError{Op: "syncfs", Path: dir, Err: ErrCrashed}
	}
	if err := c.inner.SyncFS(dir); err != nil {
		return err
	}
	c.dirSyncedLocked(dir, true)
	return nil
}

// crashFile is a File of a CrashFS.
type crashFile struct {
	c         *CrashFS
	f         vfs.File
	path      string // as opened: renames of an open file are not followed
	isDir     bool
	appending bool
}

func (f *crashFile) crashErr(op string) error {
	return &fs.PathError{Op: op, Path: f.path, Err: ErrCrashed}
}

// beforeWrite records the synced contents of [off, off+n).
func (f *crashFile) beforeWriteLocked(off int64, n int) error {
	st, err := f.c.dirtyLocked(f.path)
	if err != nil {
		return err
	}
	st.dataDirty = true
	return f.c.saveLocked(st, off, off+int64(n))
}

func (f *crashFile) Write(b []byte) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return 0, f.crashErr("write")
	}
	// The position: the end for O_APPEND, else the file offset.
	var off int64
	if f.appending {
		fi, err := f.f.Stat()
		if err != nil {
			return 0, err
		}
		off = fi.Size()
	} else if s, ok := f.f.(io.Seeker); ok {
		var err error
		if off, err = s.Seek(0, io.SeekCurrent); err != nil {
			return 0, err
		}
	}
	if err := f.beforeWriteLocked(off, len(b)); err != nil {
		return 0, err
	}
	return f.f.Write(b)
}

func (f *crashFile) WriteAt(b []byte, off int64) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return 0, f.crashErr("write")
	}
	if err := f.beforeWriteLocked(off, len(b)); err != nil {
		return 0, err
	}
	return f.f.WriteAt(b, off)
}

func (f *crashFile) Read(b []byte) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return 0, f.crashErr("read")
	}
	return f.f.Read(b)
}

func (f *crashFile) ReadAt(b []byte, off int64) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return 0, f.crashErr("read")
	}
	return f.f.ReadAt(b, off)
}

// Close closes the descriptor even after a crash.
func (f *crashFile) Close() error { return f.f.Close() }

func (f *crashFile) Name() string { return f.f.Name() }

func (f *crashFile) Stat() (fs.FileInfo, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return nil, f.crashErr("stat")
	}
	return f.f.Stat()
}

func (f *crashFile) Sync() error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return f.crashErr("sync")
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if f.isDir {
		f.c.dirSyncedLocked(f.path, false)
	} else {
		f.c.syncedLocked(f.path)
	}
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.c.crashed {
		return f.crashErr("truncate")
	}
	if err := f.c.truncateLocked(f.path, size); err != nil {
		return err
	}
	return f.f.Truncate(size)
}
