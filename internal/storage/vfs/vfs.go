// Package vfs is the filesystem seam of package storage, after Pebble's
// vfs: every open, write, sync, rename, remove, truncate, mkdir and
// directory read of the partition logs, their indexes and the checkpoints
// goes through an FS, the operating system's (Default) unless a test
// passes another one through storage.ManagerOptions.FS (or
// samsa.Config.FS). Tests inject disk faults with the wrappers of
// vfs/errorfs: a failed call, a full disk, a failed fsync, a crash that
// loses what was not fsynced.
//
// Default costs nothing over calling package os: its files are the
// *os.File values themselves, behind the File interface.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// File is an open file: what storage uses of *os.File. Implementations
// are safe for concurrent use to the extent *os.File is (ReadAt and
// WriteAt at distinct offsets, Sync, Stat).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	Stat() (fs.FileInfo, error)
	// Sync is fsync(2): the file's data and metadata reach the disk.
	Sync() error
	// Truncate sets the file's size in bytes.
	Truncate(size int64) error
}

// FS is a filesystem: the calls of package os storage makes, with the
// same arguments, results and errors (*fs.PathError wrapping syscall
// errnos, fs.ErrNotExist, ...). Implementations are safe for concurrent
// use.
type FS interface {
	// OpenFile is os.OpenFile; a directory opened with os.O_RDONLY can be
	// synced (its entries reach the disk).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(path string) error
	MkdirAll(path string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	Truncate(name string, size int64) error
	Chtimes(name string, atime, mtime time.Time) error
	// SyncFS is syncfs(2) on the filesystem holding dir: every file's
	// written data reaches the disk.
	SyncFS(dir string) error
	// Lock takes an exclusive lock on the file name, creating it, until
	// the returned Closer is closed or the process ends, as Kafka's
	// LogManager locks <log.dir>/.lock. It does not wait: a lock held
	// by another process, or by another Lock of this one, gives a
	// *LockedError.
	Lock(name string) (io.Closer, error)
}

// LockedError is the error of a Lock whose file another holder has
// locked.
type LockedError struct {
	Path string
	// PID is the holder's process id when known (it wrote it into the
	// file, or holds a POSIX lock, as a Kafka broker does), else 0.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is locked by process %d", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is locked by another process", e.Path)
}

// Unwrap is EWOULDBLOCK, the errno of a lock that would wait.
func (e *LockedError) Unwrap() error { return unix.EWOULDBLOCK }

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

// OpenFile opens with open(2) and wraps the descriptor with os.NewFile,
// which leaves it out of Go's network poller: os.OpenFile makes every
// descriptor non-blocking, tries to add it to the poller (which refuses
// regular files) and makes it blocking again, four more system calls per
// file (a node opening 100,000 logs opens 200,000 files). The file behaves
// as os.OpenFile's for files and directories; perm keeps only its
// permission bits.
func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		// A nil *os.File must not become a non-nil File.
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (osFS) Rename(oldpath, newpath string) error              { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                          { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                       { return os.RemoveAll(path) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error      { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)        { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)             { return os.Stat(name) }
func (osFS) Truncate(name string, size int64) error            { return os.Truncate(name, size) }
func (osFS) Chtimes(name string, atime, mtime time.Time) error { return os.Chtimes(name, atime, mtime) }

func (osFS) SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &fs.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}

// Lock locks name with an open file description lock (fcntl(2)
// F_OFD_SETLK, a write lock over the whole file): held per open file, so
// a second Lock in the same process fails too, and it conflicts with the
// POSIX record locks of Java's FileChannel.tryLock (a Kafka broker on the
// same dir). The holder's process id is written into the file, for the
// error a later Lock gives; Kafka's .lock is empty and Kafka reads none.
// The kernel releases the lock when the process ends, however it ends.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EINVAL {
		// A kernel before 3.15 has no OFD locks: flock(2) is also per
		// open file, but does not see a Kafka broker's lock.
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err != unix.EINTR {
				break
			}
		}
	}
	if err != nil {
		defer f.Close()
		if err != unix.EAGAIN && err != unix.EACCES {
			return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
		}
		held := &LockedError{Path: name}
		probe := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
		if unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &probe) == nil && probe.Pid > 0 {
			held.PID = int(probe.Pid)
		} else if b, err := io.ReadAll(io.LimitReader(f, 32)); err == nil {
			held.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return nil, held
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// OSFile returns the *os.File behind f, or nil when f is not one (a test
// filesystem's): callers that hand descriptors to the kernel (sendfile)
// then copy through ReadAt instead.
func OSFile(f File) *os.File {
	of, _ := f.(*os.File)
	return of
}

// Open opens name read-only.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile is os.ReadFile through fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && int64(int(fi.Size())) == fi.Size() {
		size = int(fi.Size())
	}
	b := make([]byte, 0, size+512)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// WriteFile is os.WriteFile through fsys (no fsync).
func WriteFile(fsys FS, name string, data []byte, perm fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncPath opens the file or directory at path read-only and fsyncs it:
// for a directory, the files created, renamed or removed in it stay so
// after a crash.
func SyncPath(fsys FS, path string) error {
	d, err := Open(fsys, path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
