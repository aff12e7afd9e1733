// Package errorfs injects disk faults into a vfs.FS, after Pebble's
// vfs/errorfs, for tests: an FS that asks its injectors before every call
// (fail the Nth sync of a segment, fill the disk after N bytes), and a
// CrashFS that keeps track of what is not fsynced and, on Crash, leaves on
// disk what a power loss would (crash.go).
//
// Nothing in production code imports it: a test passes the FS to
// storage.ManagerOptions.FS, samsa.Config.FS or samsa.ClusterConfig.FS.
package errorfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// Kind is the kind of a filesystem call.
type Kind uint16

// The kinds of calls, a bit each so that a set is their union.
const (
	OpOpen     Kind = 1 << iota // OpenFile
	OpRead                      // File.Read, File.ReadAt
	OpWrite                     // File.Write, File.WriteAt
	OpSync                      // File.Sync (of a file or a directory), FS.SyncFS
	OpTruncate                  // File.Truncate, FS.Truncate
	OpRename                    // FS.Rename (Path is the old path)
	OpRemove                    // FS.Remove, FS.RemoveAll
	OpMkdir                     // FS.MkdirAll
	OpReadDir                   // FS.ReadDir
	OpStat                      // FS.Stat, File.Stat, FS.Chtimes
	OpClose                     // File.Close

	// OpAny is every kind.
	OpAny Kind = 1<<iota - 1
	// OpMutate is every kind that changes the disk.
	OpMutate = OpWrite | OpSync | OpTruncate | OpRename | OpRemove | OpMkdir
)

// Op is one call: its kind, the path of the file (as opened) and, for
// writes, the bytes it writes.
type Op struct {
	Kind  Kind
	Path  string
	Bytes int
}

// Injector decides the fault of a call. Implementations are safe for
// concurrent use.
type Injector interface {
	// MaybeError returns the error op fails with, nil to let it run. A
	// *ShortWriteError lets a write write its first N bytes, then fail.
	MaybeError(op Op) error
}

// ShortWriteError is a write that writes N bytes (0 <= N < Op.Bytes) and
// returns Err, as a write that runs out of space does.
type ShortWriteError struct {
	N   int
	Err error
}

func (e *ShortWriteError) Error() string { return e.Err.Error() }
func (e *ShortWriteError) Unwrap() error { return e.Err }

// EIO and ENOSPC are the errors the injectors return by default, as the
// *fs.PathError package os would give.
var (
	EIO    = syscall.EIO
	ENOSPC = syscall.ENOSPC
)

// FS is a vfs.FS that asks its injectors, in order, before each call to
// the FS it wraps; the first error wins and the call is not made (or, for
// a *ShortWriteError, made for the first N bytes). Safe for concurrent use.
type FS struct {
	inner vfs.FS
	inj   []Injector
}

// Wrap returns inner with the injectors asked before each call.
func Wrap(inner vfs.FS, inj ...Injector) *FS { return &FS{inner: inner, inj: inj} }

func (e *FS) check(kind Kind, path string, n int) error {
	op := Op{Kind: kind, Path: path, Bytes: n}
	for _, in := range e.inj {
		if err := in.MaybeError(op); err != nil {
			return err
		}
	}
	return nil
}

func pathErr(op, path string, err error) error {
	var sw *ShortWriteError
	if errors.As(err, &sw) {
		return err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// OpenFile implements vfs.FS.
func (e *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if err := e.check(OpOpen, name, 0); err != nil {
		return nil, pathErr("open", name, err)
	}
	f, err := e.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{fs: e, f: f, path: name}, nil
}

// Rename implements vfs.FS.
func (e *FS) Rename(oldpath, newpath string) error {
	if err := e.check(OpRename, oldpath, 0); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return e.inner.Rename(oldpath, newpath)
}

// Remove implements vfs.FS.
func (e *FS) Remove(name string) error {
	if err := e.check(OpRemove, name, 0); err != nil {
		return pathErr("remove", name, err)
	}
	return e.inner.Remove(name)
}

// RemoveAll implements vfs.FS.
func (e *FS) RemoveAll(path string) error {
	if err := e.check(OpRemove, path, 0); err != nil {
		return pathErr("removeall", path, err)
	}
	return e.inner.RemoveAll(path)
}

// MkdirAll implements vfs.FS.
func (e *FS) MkdirAll(path string, perm fs.FileMode) error {
	if err := e.check(OpMkdir, path, 0); err != nil {
		return pathErr("mkdir", path, err)
	}
	return e.inner.MkdirAll(path, perm)
}

// ReadDir implements vfs.FS.
func (e *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.check(OpReadDir, name, 0); err != nil {
		return nil, pathErr("readdir", name, err)
	}
	return e.inner.ReadDir(name)
}

// Stat implements vfs.FS.
func (e *FS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name, 0); err != nil {
		return nil, pathErr("stat", name, err)
	}
	return e.inner.Stat(name)
}

// Truncate implements vfs.FS.
func (e *FS) Truncate(name string, size int64) error {
	if err := e.check(OpTruncate, name, 0); err != nil {
		return pathErr("truncate", name, err)
	}
	return e.inner.Truncate(name, size)
}

// Chtimes implements vfs.FS.
func (e *FS) Chtimes(name string, atime, mtime time.Time) error {
	if err := e.check(OpStat, name, 0); err != nil {
		return pathErr("chtimes", name, err)
	}
	return e.inner.Chtimes(name, atime, mtime)
}

// SyncFS implements vfs.FS.
func (e *FS) SyncFS(dir string) error {
	if err := e.check(OpSync, dir, 0); err != nil {
		return pathErr("syncfs", dir, err)
	}
	return e.inner.SyncFS(dir)
}

// Lock implements vfs.FS; it is asked of the injectors as an OpOpen.
func (e *FS) Lock(name string) (io.Closer, error) {
	if err := e.check(OpOpen, name, 0); err != nil {
		return nil, pathErr("lock", name, err)
	}
	return e.inner.Lock(name)
}

// file is a File of an FS.
type file struct {
	fs   *FS
	f    vfs.File
	path string
}

func (f *file) write(b []byte, do func([]byte) (int, error)) (int, error) {
	if err := f.fs.check(OpWrite, f.path, len(b)); err != nil {
		var sw *ShortWriteError
		if errors.As(err, &sw) && sw.N > 0 && sw.N < len(b) {
			n, werr := do(b[:sw.N])
			if werr != nil {
				return n, werr
			}
			return n, pathErr("write", f.path, sw.Err)
		}
		return 0, pathErr("write", f.path, err)
	}
	return do(b)
}

func (f *file) Write(b []byte) (int, error) { return f.write(b, f.f.Write) }

func (f *file) WriteAt(b []byte, off int64) (int, error) {
	return f.write(b, func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

func (f *file) Read(b []byte) (int, error) {
	if err := f.fs.check(OpRead, f.path, 0); err != nil {
		return 0, pathErr("read", f.path, err)
	}
	return f.f.Read(b)
}

func (f *file) ReadAt(b []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.path, 0); err != nil {
		return 0, pathErr("read", f.path, err)
	}
	return f.f.ReadAt(b, off)
}

func (f *file) Close() error {
	if err := f.fs.check(OpClose, f.path, 0); err != nil {
		f.f.Close()
		return pathErr("close", f.path, err)
	}
	return f.f.Close()
}

func (f *file) Name() string { return f.f.Name() }

func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.fs.check(OpStat, f.path, 0); err != nil {
		return nil, pathErr("stat", f.path, err)
	}
	return f.f.Stat()
}

func (f *file) Sync() error {
	if err := f.fs.check(OpSync, f.path, 0); err != nil {
		return pathErr("sync", f.path, err)
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.path, 0); err != nil {
		return pathErr("truncate", f.path, err)
	}
	return f.f.Truncate(size)
}

// Match selects calls: of one of Kinds (zero: any) whose path contains
// PathContains (empty: any).
type Match struct {
	Kinds        Kind
	PathContains string
}

func (m Match) matches(op Op) bool {
	return (m.Kinds == 0 || m.Kinds&op.Kind != 0) && strings.Contains(op.Path, m.PathContains)
}

// Nth fails the Nth call (1-based) that matches, and only it, with Err
// (nil: EIO). Fired reports whether it did.
type Nth struct {
	Match Match
	N     int64
	Err   error

	seen  atomic.Int64
	fired atomic.Bool
}

// MaybeError implements Injector.
func (i *Nth) MaybeError(op Op) error {
	if !i.Match.matches(op) || i.seen.Add(1) != i.N {
		return nil
	}
	i.fired.Store(true)
	if i.Err == nil {
		return EIO
	}
	return i.Err
}

// Fired reports whether the Nth matching call came and failed.
func (i *Nth) Fired() bool { return i.fired.Load() }

// Toggle fails every call that matches with Err (nil: EIO) while it is
// on; the zero value is off. Count reports the calls it failed.
type Toggle struct {
	Match Match
	Err   error

	on     atomic.Bool
	failed atomic.Int64
}

// Set turns the fault on or off.
func (i *Toggle) Set(on bool) { i.on.Store(on) }

// Count is how many calls failed.
func (i *Toggle) Count() int64 { return i.failed.Load() }

// MaybeError implements Injector.
func (i *Toggle) MaybeError(op Op) error {
	if !i.on.Load() || !i.Match.matches(op) {
		return nil
	}
	i.failed.Add(1)
	if i.Err == nil {
		return EIO
	}
	return i.Err
}

// DiskFull is a disk with a number of free bytes: each write takes its
// bytes from them, and a write that does not fit writes what does and
// fails with ENOSPC (a *ShortWriteError), as the last write to a full
// disk does. Removing or truncating files frees nothing: the test gives
// space back with SetFree. NewDiskFull makes one.
type DiskFull struct {
	mu      sync.Mutex
	free    int64
	refused int64
}

// NewDiskFull returns a disk with free bytes left.
func NewDiskFull(free int64) *DiskFull { return &DiskFull{free: free} }

// SetFree sets the free bytes (space returns, or the disk fills).
func (d *DiskFull) SetFree(n int64) {
	d.mu.Lock()
	d.free = n
	d.mu.Unlock()
}

// Refused is how many writes failed for want of space.
func (d *DiskFull) Refused() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// MaybeError implements Injector.
func (d *DiskFull) MaybeError(op Op) error {
	if op.Kind != OpWrite || op.Bytes == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if int64(op.Bytes) <= d.free {
		d.free -= int64(op.Bytes)
		return nil
	}
	n := d.free
	d.free = 0
	d.refused++
	return &ShortWriteError{N: int(n), Err: ENOSPC}
}

// Func is an Injector from a function.
type Func func(Op) error

// MaybeError implements Injector.
func (f Func) MaybeError(op Op) error { return f(op) }

// Gate is an injector that fails nothing but holds every call on a path
// under its prefix while it is shut, until Release: a log recovery (or any
// file work) as slow as a test needs, without timing. Safe for concurrent
// use.
type Gate struct {
	prefix string
	shut   atomic.Bool
	open   chan struct{} // closed by Release
	held   chan struct{} // closed at the first call held
	once   sync.Once
}

// NewGate returns an open Gate for the paths beginning with prefix.
func NewGate(prefix string) *Gate {
	return &Gate{prefix: prefix, open: make(chan struct{}), held: make(chan struct{})}
}

// Shut makes the gate hold the calls from now until Release.
func (g *Gate) Shut() { g.shut.Store(true) }

// Release lets the held calls and every later one run. Call it once.
func (g *Gate) Release() {
	g.shut.Store(false)
	close(g.open)
}

// Held is closed once a call was held.
func (g *Gate) Held() <-chan struct{} { return g.held }

// MaybeError implements Injector.
func (g *Gate) MaybeError(op Op) error {
	if g.shut.Load() && strings.HasPrefix(op.Path, g.prefix) {
		g.once.Do(func() { close(g.held) })
		<-g.open
	}
	return nil
}
