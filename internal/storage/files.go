package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// DefaultOpenFilesMax is the default of log.open.files.max: the file
// descriptors a node's segments may keep open while idle (see FileCache),
// unless the process's limit asks for fewer (DefaultOpenFiles).
const DefaultOpenFilesMax = 4096

// DefaultOpenFiles is log.open.files.max when unset: DefaultOpenFilesMax,
// or half the process's soft descriptor limit (RLIMIT_NOFILE, which the Go
// runtime raises to the hard limit at start) when that is lower, at least
// 64. The other half is left to connections and everything else.
func DefaultOpenFiles() int {
	n := DefaultOpenFilesMax
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n) {
		n = max(64, int(lim.Cur/2))
	}
	return n
}

// reservedDescriptors are the descriptors DefaultMaxConnections leaves,
// beyond log.open.files.max, to what else a node opens: checkpoints and
// snapshots being written, .txnindex files, directories to fsync, the
// metadata log, connections to other nodes, the http.listener.
const reservedDescriptors = 64

// DefaultMaxConnections is the connection limit a socket server (the
// broker's listeners, or the controller listeners) applies when
// max.connections keeps Kafka's default, Integer.MAX_VALUE (Samsa's,
// beyond Kafka): the process's soft descriptor limit (RLIMIT_NOFILE) less
// the segment files the logs keep open (openFilesMax, log.open.files.max:
// 0 for DefaultOpenFiles, negative, no cap, for half the limit) and
// reservedDescriptors, at least 16; math.MaxInt32 when the limit is
// unknown or past 2³⁰. Kafka accepts until accept(2) fails with EMFILE,
// and the next segment roll or index open then takes a log dir offline:
// idle client connections could stop a broker taking writes. Here they
// wait in the listen backlog instead, and the logs keep their files.
func DefaultMaxConnections(openFilesMax int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return math.MaxInt32
	}
	if openFilesMax == 0 {
		openFilesMax = DefaultOpenFiles()
	}
	return maxConnections(lim.Cur, openFilesMax)
}

// maxConnections is DefaultMaxConnections for a descriptor limit nofile.
func maxConnections(nofile uint64, openFilesMax int) int {
	if nofile == 0 || nofile > 1<<30 {
		return math.MaxInt32
	}
	files := uint64(openFilesMax)
	if openFilesMax < 0 {
		files = nofile / 2
	}
	if nofile < files+reservedDescriptors+16 {
		return 16
	}
	return int(nofile - files - reservedDescriptors)
}

// FileCache keeps the segment files of every log of a node open on use and
// closes the least recently used idle ones once more than a cap are open
// (Samsa's log.open.files.max, beyond Kafka: Kafka keeps each segment's
// .log open and memory-maps its indexes for as long as the log is open,
// so its descriptors and mappings grow with partitions × segments and
// operators raise ulimit -n and vm.max_map_count by hand).
//
// A file in use is never closed under its user: each use holds a
// reference (acquire/release), and only files with none are closed by
// the cache. The cap is a soft one: when every open file is in use, more
// are opened and the excess closed as they become idle. Closing a file
// the cache evicted does not fsync it: its dirty pages stay in the page
// cache and reach the disk as they would have; the next flush of the
// segment opens it again to fsync it.
//
// The zero value is not usable; NewFileCache makes one. Safe for
// concurrent use.
type FileCache struct {
	max  int    // 0: no cap
	fsys vfs.FS // where the files are (vfs.Default)

	mu    sync.Mutex // guards the fields below and every cachedFile's state
	open  int        // descriptors open
	inUse int        // open files with users (refs > 0)
	idle  cachedFile // sentinel of the list of open files nobody uses, most recent first

	opens atomic.Int64 // files opened, for tests and metrics
}

// NewFileCache returns a cache that keeps at most max segment files open
// while they are idle; zero or negative means no cap (files stay open until
// their segment closes, as before the cache existed).
func NewFileCache(max int) *FileCache {
	return newFileCache(max, nil)
}

// newFileCache is NewFileCache on fsys (nil: vfs.Default).
func newFileCache(max int, fsys vfs.FS) *FileCache {
	if fsys == nil {
		fsys = vfs.Default
	}
	c := &FileCache{max: max, fsys: fsys}
	c.idle.next, c.idle.prev = &c.idle, &c.idle
	return c
}

// Open reports the descriptors the cache holds open now.
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// Opens reports how many times the cache opened a file (first use and
// reopening after eviction).
func (c *FileCache) Opens() int64 { return c.opens.Load() }

// full reports whether files in use take the whole cap: opening one more
// goes past it.
func (c *FileCache) full() bool {
	if c.max <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inUse >= c.max
}

// Max is the cap given to NewFileCache (zero or negative: none).
func (c *FileCache) Max() int { return c.max }

// cachedFile is one segment file whose descriptor the cache opens on use.
type cachedFile struct {
	c    *FileCache
	flag int // extra open flags: os.O_CREATE for a file created on first write
	// Guarded by c.mu:
	path       string
	f          vfs.File
	refs       int
	closed     bool        // the segment closed it: no more uses
	prev, next *cachedFile // in c.idle when open and unused
}

// lazySegment returns handles for the three files of a segment that open
// nothing until used: its .log, which must exist, and its index files,
// created on first use (os.O_CREATE: a segment without index entries
// need not have them); one allocation for the three.
func (c *FileCache) lazySegment(log, index, timeIndex string) (l, i, t *cachedFile) {
	h := &[3]cachedFile{{c: c, path: log}, {c: c, path: index, flag: os.O_CREATE}, {c: c, path: timeIndex, flag: os.O_CREATE}}
	return &h[0], &h[1], &h[2]
}

// file returns a handle for path, created by the caller with f, which the
// cache now owns.
func (c *FileCache) file(path string, f vfs.File) *cachedFile {
	h := &cachedFile{c: c, path: path}
	if f != nil {
		c.mu.Lock()
		h.f = f
		c.open++
		c.pushIdleLocked(h)
		victims := c.evictLocked()
		c.mu.Unlock()
		closeAll(victims)
	}
	return h
}

func (c *FileCache) pushIdleLocked(h *cachedFile) {
	h.next, h.prev = c.idle.next, &c.idle
	h.next.prev, c.idle.next = h, h
}

func (c *FileCache) unlinkLocked(h *cachedFile) {
	if h.next == nil {
		return
	}
	h.prev.next, h.next.prev = h.next, h.prev
	h.prev, h.next = nil, nil
}

// evictLocked takes the least recently used idle files off while more than
// max are open, and returns their descriptors for the caller to close once
// it has released mu.
func (c *FileCache) evictLocked() []vfs.File {
	var victims []vfs.File
	for c.max > 0 && c.open > c.max && c.idle.prev != &c.idle {
		h := c.idle.prev
		c.unlinkLocked(h)
		victims = append(victims, h.f)
		h.f = nil
		c.open--
	}
	return victims
}

func closeAll(fs []vfs.File) {
	for _, f := range fs {
		f.Close()
	}
}

// acquire returns the open descriptor, opening it when the cache had closed
// it, and holds it open until release. Errors: errSegmentClosed once the
// segment closed the file or when the file is gone (a reader of a deleted
// segment then retries on the current segments), the open's error
// otherwise.
func (h *cachedFile) acquire() (vfs.File, error) {
	return h.acquireFlag(h.flag)
}

// acquireFlag is acquire opening with flag; without os.O_CREATE a missing
// file of a handle that has it gives (nil, nil).
func (h *cachedFile) acquireFlag(flag int) (vfs.File, error) {
	c := h.c
	c.mu.Lock()
	if h.closed {
		c.mu.Unlock()
		return nil, errSegmentClosed
	}
	if h.f != nil {
		if h.refs == 0 {
			c.inUse++
		}
		h.refs++
		c.unlinkLocked(h)
		c.mu.Unlock()
		return h.f, nil
	}
	path := h.path
	c.mu.Unlock()
	f, err := c.fsys.OpenFile(path, os.O_RDWR|flag, 0o644)
	c.mu.Lock()
	switch {
	case err != nil:
		closed, renamed := h.closed, h.path != path
		c.mu.Unlock()
		switch {
		case closed:
			return nil, errSegmentClosed
		case renamed:
			return h.acquireFlag(flag)
		case errors.Is(err, fs.ErrNotExist) && h.flag&os.O_CREATE != 0:
			return nil, nil // created on first write: nothing there yet
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: %w", errSegmentClosed, err)
		}
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	case h.closed || h.f != nil || h.path != path:
		// Closed, opened by another user, or renamed meanwhile: use
		// what is there now.
		c.mu.Unlock()
		f.Close()
		return h.acquireFlag(flag)
	}
	c.opens.Add(1)
	h.f = f
	h.refs++
	c.inUse++
	c.open++
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return f, nil
}

// release ends a use begun by acquire.
func (h *cachedFile) release() {
	c := h.c
	c.mu.Lock()
	h.refs--
	if h.refs > 0 {
		c.mu.Unlock()
		return
	}
	c.inUse--
	if h.closed {
		f := h.f
		h.f = nil
		c.open--
		c.mu.Unlock()
		f.Close()
		return
	}
	c.pushIdleLocked(h)
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
}

// close ends the file's life: later acquires give errSegmentClosed, and
// the descriptor is closed now, or by the last release of those using it.
func (h *cachedFile) close() error {
	c := h.c
	c.mu.Lock()
	if h.closed {
		c.mu.Unlock()
		return nil
	}
	h.closed = true
	if h.f == nil || h.refs > 0 {
		c.mu.Unlock()
		return nil
	}
	f := h.f
	h.f = nil
	c.unlinkLocked(h)
	c.open--
	c.mu.Unlock()
	return f.Close()
}

// rename renames the file to path (and records it, so that a later open
// finds it), keeping it open meanwhile when it was. A lazily created file
// that does not exist yet is not renamed: ErrNotExist.
func (h *cachedFile) rename(path string) error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.fsys.Rename(h.path, path)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		h.path = path
	}
	return err
}

// name is the file's path now.
func (h *cachedFile) name() string {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.path
}

// The file operations segments use, each an acquire, the call and a
// release.

func (h *cachedFile) ReadAt(b []byte, off int64) (int, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release()
	return fileReadAt(f, b, off)
}

// fileReadAt is f.ReadAt(b, off) without b escaping to the heap when f is
// the operating system's file (see readAtCopy).
func fileReadAt(f vfs.File, b []byte, off int64) (int, error) {
	if of, ok := f.(*os.File); ok {
		return of.ReadAt(b, off)
	}
	return readAtCopy(f, b, off)
}

// readAtCopy and writeAtCopy call a File that is not an *os.File (a
// test's, vfs/errorfs) on a copy of b: b given to an interface method
// would escape to the heap in every call, the operating system's too
// (an allocation a read on the fetch path).
func readAtCopy(f vfs.File, b []byte, off int64) (int, error) {
	tmp := make([]byte, len(b))
	n, err := f.ReadAt(tmp, off)
	copy(b, tmp[:n])
	return n, err
}

func writeAtCopy(f vfs.File, b []byte, off int64) (int, error) {
	return f.WriteAt(bytes.Clone(b), off)
}

func (h *cachedFile) WriteAt(b []byte, off int64) (int, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release()
	return fileWriteAt(f, b, off)
}

// fileWriteAt is f.WriteAt(b, off) without b escaping to the heap when f
// is the operating system's file (see readAtCopy).
func fileWriteAt(f vfs.File, b []byte, off int64) (int, error) {
	if of, ok := f.(*os.File); ok {
		return of.WriteAt(b, off)
	}
	return writeAtCopy(f, b, off)
}

func (h *cachedFile) Truncate(size int64) error {
	f, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	return f.Truncate(size)
}

// Sync fsyncs the file; a lazily created file not created yet has
// nothing to sync.
func (h *cachedFile) Sync() error {
	f, err := h.acquireFlag(h.flag &^ os.O_CREATE)
	if f == nil || err != nil {
		return err
	}
	defer h.release()
	return f.Sync()
}

// Stat stats the file by its name, without opening it.
func (h *cachedFile) Stat() (os.FileInfo, error) { return h.c.fsys.Stat(h.name()) }

// readAll reads the whole file, without opening it in the cache: empty
// for a lazily created file not created yet.
func (h *cachedFile) readAll() ([]byte, error) {
	b, err := vfs.ReadFile(h.c.fsys, h.name())
	if errors.Is(err, fs.ErrNotExist) && h.flag&os.O_CREATE != 0 {
		return nil, nil
	}
	return b, err
}

// PartitionMemory is the memory, in bytes, DefaultPartitionsMax budgets
// for each partition a node hosts: its log, replica state and share of
// the metadata image at rest, measured at about 20 KiB (scripts/scale.sh),
// with room for a segment's indexes and producer state.
const PartitionMemory = 64 << 10

// DefaultPartitionsMax is log.partitions.max when unset: the partitions
// the machine's memory (or the cgroup's limit, when lower) holds at
// PartitionMemory each, at least 1,000, and, when openFilesMax is
// negative (every segment keeps its 3 files open), no more than half the
// descriptor limit allows.
func DefaultPartitionsMax(openFilesMax int) int {
	var nofile uint64
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		nofile = lim.Cur
	}
	return partitionsMax(memoryLimit(), nofile, openFilesMax)
}

// partitionsMax is DefaultPartitionsMax for a memory limit in bytes and a
// descriptor limit (zero when unknown). The floor of 1,000 is memory's
// only: with every file open, a node at 1,000 partitions under a 1,024
// descriptor limit ran out at its first segment rolls, took its log dir
// offline and could not start again.
func partitionsMax(mem int64, nofile uint64, openFilesMax int) int {
	n := 1 << 20
	if mem > 0 {
		n = min(n, max(int(mem/PartitionMemory), 1000))
	}
	if openFilesMax < 0 && nofile > 0 && nofile < 1<<30 {
		n = min(n, max(int(nofile/2/3), 1))
	}
	return n
}

// memoryLimit is the smaller of MemTotal (/proc/meminfo) and the cgroup v2
// memory.max, in bytes; zero when neither is known.
func memoryLimit() int64 {
	var mem int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						mem = kb << 10
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && (mem == 0 || v < mem) {
			mem = v
		}
	}
	return mem
}
