package storage

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/samsahq/samsa/internal/parallel"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// ErrInvalidPartition reports a topic name or partition number Create cannot
// make a directory for.
var ErrInvalidPartition = errors.New("storage: invalid topic partition")

// ErrOffline reports a partition whose log failed to open when the log
// dirs were loaded (a corrupt or unreadable log, no descriptor left): the
// node runs without it, and Create refuses it until the node restarts
// (Kafka's KAFKA_STORAGE_ERROR).
var ErrOffline = errors.New("storage: log offline")

// deleteSuffix ends the name of a partition directory being deleted:
// <topic>-<partition>.<32 hex digits>-delete, as Kafka names it.
const deleteSuffix = "-delete"

// ManagerOptions are the arguments of OpenManager.
type ManagerOptions struct {
	// Stats, when set, is given to every log (OpenOptions.Stats).
	Stats *Stats
	// Dirs are the log dirs (log.dirs). At least one.
	Dirs []string
	// NodeID is node.id, written to and checked against meta.properties.
	NodeID int32
	// ClusterID is checked against meta.properties; empty takes the one
	// found there, or generates a new one (NewUUID) for fresh dirs.
	ClusterID string
	// Default is the configuration of logs found on disk, until their topic
	// config is applied with Log.SetConfig.
	Default Config
	// RetentionCheckInterval is log.retention.check.interval.ms: how often
	// the retention task runs DeleteOldSegments on every log (default
	// 5 minutes). It also runs soon after a log's start offset moves
	// (DeleteRecords).
	RetentionCheckInterval time.Duration
	// FlushCheckInterval is log.flush.scheduler.interval.ms: how often the
	// flush task checks the logs against their flush.ms. Zero (Kafka's
	// default is Long.MAX_VALUE) checks when the next log is due instead
	// (flush.go).
	FlushCheckInterval time.Duration
	// CheckpointInterval is log.flush.offset.checkpoint.interval.ms: how
	// often the recovery-point, log-start-offset and cleaner-offset
	// checkpoints are written (Checkpoint), then the hook set with
	// SetCheckpointHook runs. Zero or negative means 1 minute.
	CheckpointInterval time.Duration
	// RollCheckInterval is how often the periodic task rolls the logs
	// whose active segment is older than their segment.ms (MaybeRoll).
	// Zero means DefaultRollCheckInterval (1 s); negative never rolls by
	// age.
	RollCheckInterval time.Duration
	// Cleaner configures the log cleaner of compacted logs.
	Cleaner CleanerOptions
	// RecoveryThreads is num.recovery.threads.per.data.dir: the logs of
	// a log dir opened (and recovered) at once by OpenManager, and closed
	// at once by Close. Zero or negative means DefaultRecoveryThreads.
	RecoveryThreads int
	// OpenFilesMax is log.open.files.max (Samsa's; Kafka has none): the
	// segment file descriptors the node's logs keep open while idle, the
	// least recently used closed beyond it (see FileCache). Zero means
	// DefaultOpenFiles(); negative means no cap.
	OpenFilesMax int
	Logger       *slog.Logger // nil discards
	Now          func() time.Time
	// FS is where the log dirs are: every file of the logs, their
	// indexes and the checkpoints is opened, written, synced, renamed
	// and removed through it. Nil means vfs.Default, the operating
	// system's; tests pass the fault-injecting filesystems of
	// vfs/errorfs.
	FS vfs.FS
	// OnDirOffline, when set, is called once for each log dir taken
	// offline by an I/O error (see Manager.OfflineDirs), with the dir's
	// path and directory.id and whether every log dir is now offline.
	// It is called from the goroutine that met the error, possibly with
	// a log's lock held: it must not block or call into the Manager.
	OnDirOffline func(path, dirID string, all bool)
	// Background, when set and a log dir was not shut down cleanly (no
	// CleanShutdownFile), has OpenManager open only the logs of First
	// before it returns, and every other log in the background, still
	// RecoveryThreads per dir (see Loaded). A node opens its metadata
	// log first, so that its metadata quorum voter and controller run
	// while its data logs recover, as Kafka's KafkaRaftManager opens
	// __cluster_metadata-0 on its own before the broker's LogManager
	// loads the logs. After a clean shutdown every log is opened before
	// OpenManager returns, Background or not (from the manifest: fast).
	Background bool
	// First are the logs Background opens before OpenManager returns.
	First []TopicPartition
}

// CleanerOptions configure a Manager's log cleaner.
type CleanerOptions struct {
	// Disable turns the cleaner off (log.cleaner.enable=false):
	// compacted logs then grow without bound.
	Disable bool
	// Backoff is log.cleaner.backoff.ms: how long the cleaner sleeps when
	// no log needs cleaning (default 15 s).
	Backoff time.Duration
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size in bytes: it
	// bounds the keys one cleaning maps (see MaxKeysForBuffer; default
	// 128 MiB).
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// bytes the cleaner reads and writes of segments per second, over
	// all its cleanings (Kafka's Throttler, see throttler). Zero,
	// negative or math.MaxFloat64 (Kafka's default) means unthrottled.
	IOMaxBytesPerSecond float64
}

// SetCleaner applies the dynamic log cleaner configs at once
// (log.cleaner.backoff.ms, log.cleaner.dedupe.buffer.size,
// log.cleaner.io.max.bytes.per.second updated as dynamic broker configs):
// the rate holds for the cleaning in progress too, the others from the
// next cleaning or sleep. Disable is ignored (log.cleaner.enable is
// read-only). Zero or negative Backoff or DedupeBufferSize mean their
// defaults. Safe for concurrent use.
func (m *Manager) SetCleaner(o CleanerOptions) {
	if o.Backoff <= 0 {
		o.Backoff = DefaultCleanerBackoff
	}
	if o.DedupeBufferSize <= 0 {
		o.DedupeBufferSize = DefaultDedupeBufferSize
	}
	m.cleanerBackoff.Store(int64(o.Backoff))
	m.cleanerDedupe.Store(o.DedupeBufferSize)
	if m.throttle.rate() != o.IOMaxBytesPerSecond {
		m.throttle.setRate(o.IOMaxBytesPerSecond)
	}
}

// Defaults of ManagerOptions.
const (
	DefaultRetentionCheckInterval = 5 * time.Minute  // log.retention.check.interval.ms
	DefaultCleanerBackoff         = 15 * time.Second // log.cleaner.backoff.ms
	DefaultCheckpointInterval     = time.Minute      // log.flush.offset.checkpoint.interval.ms
	DefaultRollCheckInterval      = time.Second
	DefaultRecoveryThreads        = 2 // num.recovery.threads.per.data.dir (Kafka 4.0's)
)

// Manager holds every partition log of a node's log dirs (Kafka's
// LogManager). Safe for concurrent use.
type Manager struct {
	opts      ManagerOptions
	logger    *slog.Logger
	files     *FileCache // every log's segment descriptors
	fsys      vfs.FS     // files.fsys
	dirs      []*logDir
	clusterID string
	locks     []io.Closer // each log dir's LockFile, held until Close

	ckMu sync.Mutex // serializes checkpoint writes

	rolls rollSchedule // the periodic roll check's (tasks.go)
	// ckptMoved: a log's recovery point, log start offset or cleaner
	// offset moved, or a log came or went, since the last checkpoint
	// written (checkpoint skips an unchanged one).
	ckptMoved atomic.Bool

	mu       sync.Mutex // guards the fields below
	logs     map[TopicPartition]*managedLog
	offline  map[TopicPartition]offlineLog    // logs that failed to load
	perDir   map[*logDir]int                  // logs in each dir, counting those being created
	creating map[TopicPartition]chan struct{} // Create under way, closed when it ends
	// dropped holds the partitions deleted from each dir since its
	// checkpoint files were last written: those files may still name
	// them (DeleteBatch does not rewrite them), so a Create of one in
	// that dir writes them first (checkpointDropped). nil when empty.
	dropped map[droppedLog]struct{}
	closed  bool

	wg sync.WaitGroup // directory removals in the background

	// Background tasks (tasks.go): retention, the log cleaner, rolls by
	// age and checkpoints.
	stop          chan struct{} // closed by Close
	cancel        func()        // cancels a cleaning in progress
	tasks         sync.WaitGroup
	retentionKick chan struct{}
	cleanerKick   chan struct{}
	flushKick     chan struct{}
	flushWake     atomic.Int64 // Unix ns of the flush task's next check (flush.go)
	throttle      *throttler   // the cleaner's I/O, never nil (SetCleaner may change its rate)
	// cleanerBackoff and cleanerDedupe are Cleaner.Backoff and
	// Cleaner.DedupeBufferSize, which SetCleaner changes.
	cleanerBackoff, cleanerDedupe atomic.Int64
	ckptHook                      atomic.Pointer[func() error]

	// brokerEpoch is what Close writes into CleanShutdownFile
	// (SetBrokerEpoch); cleanEpoch is what the files found at open held
	// (CleanShutdownBrokerEpoch).
	brokerEpoch atomic.Int64
	cleanEpoch  int64
	// fromManifest counts the logs OpenManager set up from the log
	// dirs' ManifestFile (for tests and the log line); guarded by mu.
	fromManifest int64

	// loaded is closed once every log found at open is loaded (offline
	// when it failed), or the loading stopped because Close was called;
	// pending (guarded by mu) holds the logs still to be loaded in the
	// background (ManagerOptions.Background), loadWG its goroutine.
	loaded  chan struct{}
	pending map[TopicPartition]bool
	loadWG  sync.WaitGroup
}

type logDir struct {
	path     string
	dirID    string
	unsynced atomic.Bool           // partition directories were created since the last fsync of this one
	offline  atomic.Pointer[error] // the I/O error that took the dir offline (dirFailed), nil while online
	syncMu   sync.Mutex            // one syncLogDir at a time
	// loading is set while logs found in the dir at open are still to be
	// loaded in the background: its checkpoints, manifest and
	// clean-shutdown marker are not written (they would drop or vouch
	// for logs never opened).
	loading atomic.Bool
}

// syncLogDir fsyncs the log dir when partition directories were created
// in it since it was last synced.
func (m *Manager) syncLogDir(d *logDir) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if !d.unsynced.Swap(false) {
		return nil
	}
	if err := syncDir(m.fsys, d.path); err != nil {
		d.unsynced.Store(true)
		return err
	}
	return nil
}

// offlineLog is a log that failed to load: where it is and why.
type offlineLog struct {
	dir  *logDir
	path string
	err  error
}

type managedLog struct {
	log *Log
	dir *logDir
}

// OpenManager prepares the log dirs and opens every partition log in them:
// it creates the dirs, writes or checks meta.properties (one cluster id
// across dirs, node.id equal to NodeID), reads the recovery point and log
// start offset checkpoints, and opens each <topic>-<partition> directory,
// recovering from the recovery point unless the dir was shut down cleanly.
// Directories of deleted partitions left by a crash are removed. The logs
// of a dir are opened RecoveryThreads at a time, with progress logged every
// tenth of a dir of 1,000 logs or more. A log that fails to open is
// offline (see Offline, ErrOffline), not an error. With
// ManagerOptions.Background, after a shutdown that was not clean, only
// the logs of ManagerOptions.First are open when it returns: the others
// are loaded in the background (Loaded), and the background tasks
// (retention, the cleaner, rolls, checkpoints) start once they are.
// Errors: a meta.properties mismatch, a partition in two dirs, I/O errors
// of the log dirs themselves.
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if len(opts.Dirs) == 0 {
		return nil, errors.New("storage: no log dirs")
	}
	if err := opts.Default.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetentionCheckInterval <= 0 {
		opts.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if opts.RollCheckInterval == 0 {
		opts.RollCheckInterval = DefaultRollCheckInterval
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.Cleaner.Backoff <= 0 {
		opts.Cleaner.Backoff = DefaultCleanerBackoff
	}
	if opts.Cleaner.DedupeBufferSize <= 0 {
		opts.Cleaner.DedupeBufferSize = DefaultDedupeBufferSize
	}
	if opts.OpenFilesMax == 0 {
		opts.OpenFilesMax = DefaultOpenFiles()
	}
	if opts.RecoveryThreads <= 0 {
		opts.RecoveryThreads = DefaultRecoveryThreads
	}
	m := &Manager{opts: opts, logger: logger, logs: map[TopicPartition]*managedLog{}, offline: map[TopicPartition]offlineLog{}, perDir: map[*logDir]int{}, creating: map[TopicPartition]chan struct{}{},
		stop: make(chan struct{}), retentionKick: make(chan struct{}, 1), cleanerKick: make(chan struct{}, 1),
		throttle: rateThrottler(opts.Cleaner.IOMaxBytesPerSecond)}
	m.cleanerBackoff.Store(int64(opts.Cleaner.Backoff))
	m.brokerEpoch.Store(-1)
	m.cleanerDedupe.Store(opts.Cleaner.DedupeBufferSize)
	m.flushKick = make(chan struct{}, 1)
	m.files = newFileCache(opts.OpenFilesMax, opts.FS)
	m.fsys = m.files.fsys
	if err := m.prepareDirs(); err != nil {
		m.unlockDirs()
		return nil, err
	}
	fail := func(err error) (*Manager, error) {
		m.closeLogs()
		m.wg.Wait()
		m.unlockDirs()
		return nil, err
	}
	m.cleanEpoch = -1
	m.loaded, m.pending = make(chan struct{}), map[TopicPartition]bool{}
	loads := make([]*dirLoad, 0, len(m.dirs))
	in := map[TopicPartition]*logDir{} // the dir each partition was found in
	allClean, later := true, 0         // later: logs Background would load after OpenManager returns
	for i, d := range m.dirs {
		dl, err := m.scanDir(d, in)
		if err != nil {
			return fail(err)
		}
		loads = append(loads, dl)
		allClean = allClean && dl.clean
		for _, j := range dl.jobs {
			if !slices.Contains(m.opts.First, j.tp) {
				later++
			}
		}
		if i == 0 {
			m.cleanEpoch = dl.cleanEpoch
		} else if dl.cleanEpoch != m.cleanEpoch {
			m.cleanEpoch = -1
		}
	}
	if !m.opts.Background || allClean || later == 0 {
		for _, dl := range loads {
			m.openLogs(dl, dl.jobs)
			if err := m.dropMarker(dl); err != nil {
				return fail(err)
			}
			m.logLoaded(dl)
		}
		m.startTasks()
		close(m.loaded)
	} else {
		rest := make([][]*loadJob, len(loads))
		for i, dl := range loads {
			var first []*loadJob
			for _, j := range dl.jobs {
				if slices.Contains(m.opts.First, j.tp) {
					first = append(first, j)
				} else {
					rest[i] = append(rest[i], j)
					m.pending[j.tp] = true
				}
			}
			m.openLogs(dl, first)
			// Before the first write to any log: a crash from now on
			// recovers from the checkpoints.
			if err := m.dropMarker(dl); err != nil {
				return fail(err)
			}
			dl.d.loading.Store(len(rest[i]) > 0)
		}
		// logs counts every log found, as the dirs' "loaded log dir" lines
		// do once loaded (logs plus offline): first were opened above,
		// background are still to load.
		found := 0
		for _, dl := range loads {
			found += len(dl.jobs)
		}
		m.logger.Info("loading logs in the background", "logs", found, "first", found-len(m.pending), "background", len(m.pending), "dirs", len(m.dirs))
		m.loadWG.Add(1)
		go m.loadInBackground(loads, rest)
	}
	m.tasks.Add(1)
	go m.flushTask()
	return m, nil
}

// Loaded is closed once every log found in the log dirs at open is
// loaded (or offline when it failed to), or the loading stopped because
// Close was called. Until then Get, Logs and the checkpoints know only
// the logs loaded so far, and Create or Delete of a log still to be
// loaded waits for it. Without ManagerOptions.Background it is closed
// when OpenManager returns.
func (m *Manager) Loaded() <-chan struct{} { return m.loaded }

// loadInBackground opens the logs of rest (by dir, as loads), then starts
// the background tasks and closes loaded; Close stops it between logs.
func (m *Manager) loadInBackground(loads []*dirLoad, rest [][]*loadJob) {
	defer m.loadWG.Done()
	defer close(m.loaded)
	for i, dl := range loads {
		if !m.openLogs(dl, rest[i]) {
			m.logger.Info("stopped loading logs: the log manager is closing", "dir", dl.d.path)
			return
		}
		dl.d.loading.Store(false)
		m.logLoaded(dl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.startTasks()
	}
}

// prepareDirs creates the dirs and settles meta.properties.
func (m *Manager) prepareDirs() error {
	metas := make([]*MetaProperties, len(m.opts.Dirs))
	clusterID := m.opts.ClusterID
	seen := map[string]string{}
	for i, dir := range m.opts.Dirs {
		if err := m.fsys.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("storage: create log dir: %w", err)
		}
		if err := m.lockDir(dir); err != nil {
			return err
		}
		meta, err := readMetaProperties(m.fsys, filepath.Join(dir, MetaPropertiesFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if meta.NodeID != m.opts.NodeID {
			return fmt.Errorf("storage: log dir %s belongs to node %d, not %d", dir, meta.NodeID, m.opts.NodeID)
		}
		if clusterID != "" && meta.ClusterID != clusterID {
			return fmt.Errorf("storage: log dir %s belongs to cluster %s, not %s", dir, meta.ClusterID, clusterID)
		}
		clusterID = meta.ClusterID
		if other, dup := seen[meta.DirectoryID]; dup && meta.DirectoryID != "" {
			return fmt.Errorf("storage: log dirs %s and %s have the same directory.id %s", other, dir, meta.DirectoryID)
		}
		seen[meta.DirectoryID] = dir
		metas[i] = &meta
	}
	if clusterID == "" {
		clusterID = NewUUID()
		m.logger.Info("generated cluster id", "cluster_id", clusterID)
	}
	m.clusterID = clusterID
	for i, dir := range m.opts.Dirs {
		meta := metas[i]
		if meta == nil || meta.DirectoryID == "" || meta.Version != 1 {
			if meta == nil {
				meta = &MetaProperties{NodeID: m.opts.NodeID, ClusterID: clusterID}
			}
			meta.Version = 1
			if meta.DirectoryID == "" {
				meta.DirectoryID = NewUUID()
			}
			if err := writeMetaProperties(m.fsys, filepath.Join(dir, MetaPropertiesFile), *meta); err != nil {
				return err
			}
		}
		m.dirs = append(m.dirs, &logDir{path: dir, dirID: meta.DirectoryID})
	}
	return nil
}

// LockFile is the file in each log dir that the node holding the dir
// locks (Kafka's LogManager.LockFileName): a second process started on
// the same dir fails at once, before it reads or recovers anything.
const LockFile = ".lock"

// lockDir locks dir's LockFile for as long as the Manager is open (see
// vfs.FS.Lock). Kafka fails the same way ("Failed to acquire lock on file
// .lock in <dir>. A Kafka instance in another process or thread is using
// this directory.").
func (m *Manager) lockDir(dir string) error {
	l, err := m.fsys.Lock(filepath.Join(dir, LockFile))
	var held *vfs.LockedError
	if errors.As(err, &held) {
		who := "another process"
		if held.PID > 0 {
			who = "process " + strconv.Itoa(held.PID)
		}
		return fmt.Errorf("storage: log dir %s is in use by %s (it holds %s): stop it, or give this node other log.dirs: %w", dir, who, held.Path, err)
	}
	if err != nil {
		return fmt.Errorf("storage: lock log dir %s: %w", dir, err)
	}
	m.locks = append(m.locks, l)
	return nil
}

// unlockDirs releases the log dirs' locks.
func (m *Manager) unlockDirs() {
	for _, l := range m.locks {
		l.Close() // the lock goes with the descriptor; nothing to report
	}
	m.locks = nil
}

// dirLoad is what scanDir found in one log dir at open: the logs to load
// and what loading them needs.
type dirLoad struct {
	d          *logDir
	clean      bool  // the dir was shut down cleanly (its CleanShutdownFile)
	cleanEpoch int64 // the broker epoch the marker held, -1 for none
	removed    bool  // readManifest removed a manifest
	lsos       map[TopicPartition]int64
	cleaned    map[TopicPartition]int64
	jobs       []*loadJob
	start      time.Time
	done       atomic.Int64 // jobs opened (or failed), for the progress lines
	fromManif  atomic.Int64 // logs set up from the manifest
	offline    int          // jobs that failed, guarded by the Manager's mu
}

// loadJob is one partition directory to open.
type loadJob struct {
	tp   TopicPartition
	path string
	rp   int64
	man  *logManifest // its entry of the dir's ManifestFile; nil: none
	log  *Log
	err  error
}

// scanDir reads the markers, checkpoints and manifest of one log dir and
// lists its partition directories (in maps each partition found so far
// to its dir: one in two dirs is an error). Directories of deleted
// partitions are removed in the background.
func (m *Manager) scanDir(d *logDir, in map[TopicPartition]*logDir) (*dirLoad, error) {
	dl := &dirLoad{d: d, cleanEpoch: -1}
	marker, err := vfs.ReadFile(m.fsys, filepath.Join(d.path, CleanShutdownFile))
	dl.clean = err == nil
	manifestID := ""
	if dl.clean {
		dl.cleanEpoch, manifestID = decodeCleanShutdown(marker)
	}
	rps, err := ReadOffsetCheckpoint(m.fsys, filepath.Join(d.path, RecoveryPointCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring recovery point checkpoint: every log will be recovered in full", "err", err)
		rps, dl.clean = map[TopicPartition]int64{}, false
	}
	dl.lsos, err = ReadOffsetCheckpoint(m.fsys, filepath.Join(d.path, LogStartOffsetCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring log start offset checkpoint", "err", err)
		dl.lsos = map[TopicPartition]int64{}
	}
	dl.cleaned, err = ReadOffsetCheckpoint(m.fsys, filepath.Join(d.path, CleanerOffsetCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring cleaner offset checkpoint: compacted logs will be cleaned in full", "err", err)
		dl.cleaned = map[TopicPartition]int64{}
	}
	dl.start = time.Now()
	var manifest map[string]*logManifest
	manifest, dl.removed = m.readManifest(d, dl.clean, manifestID)
	entries, err := m.fsys.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("storage: read log dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		path := filepath.Join(d.path, name)
		if strings.HasSuffix(name, deleteSuffix) {
			m.removeInBackground([]string{path})
			continue
		}
		tp, ok := ParseTopicPartition(name)
		if !ok {
			m.logger.Warn("ignoring directory in log dir", "dir", path)
			continue
		}
		if other, dup := in[tp]; dup && other != d {
			return nil, fmt.Errorf("storage: partition %s in both %s and %s", tp, other.path, d.path)
		}
		if in[tp] == d {
			continue
		}
		in[tp] = d
		rp, found := rps[tp]
		if dl.clean && found {
			rp = -1
		}
		dl.jobs = append(dl.jobs, &loadJob{tp: tp, path: path, rp: rp, man: manifest[name]})
	}
	m.dropUnfound(d, in, rps, dl.lsos, dl.cleaned)
	return dl, nil
}

// dropUnfound records in m.dropped the partitions that d's checkpoint
// files name but that have no directory in d (in maps each partition
// found to its dir): deleted before a crash that left the files
// unwritten (DeleteBatch does not rewrite them), or moved to another
// dir. A Create of one in d then writes the files first (CreateTopic),
// as it does for one deleted by this process, so that a second crash
// never loads the new log with the old one's log start offset and
// recovery point.
func (m *Manager) dropUnfound(d *logDir, in map[TopicPartition]*logDir, files ...map[TopicPartition]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range files {
		for tp := range f {
			if in[tp] == d {
				continue
			}
			if m.dropped == nil {
				m.dropped = map[droppedLog]struct{}{}
			}
			m.dropped[droppedLog{d, tp}] = struct{}{}
		}
	}
}

// openLogs opens (and recovers) the logs of jobs, of dl's dir,
// num.recovery.threads.per.data.dir at a time, reporting progress every
// tenth of a dir of 1,000 logs or more, and adds them to the Manager (a
// log that fails to open is offline). It returns false when Close
// stopped it before every job was opened.
func (m *Manager) openLogs(dl *dirLoad, jobs []*loadJob) bool {
	threads := max(1, min(m.opts.RecoveryThreads, len(jobs)))
	var stopped atomic.Bool
	parallel.For(threads, len(jobs), func(i int) {
		select {
		case <-m.stop:
			stopped.Store(true)
			return
		default:
		}
		j := jobs[i]
		opts := OpenOptions{
			Dir:            j.path,
			Config:         m.opts.Default,
			RecoveryPoint:  j.rp,
			LogStartOffset: dl.lsos[j.tp],
			Logger:         lazyWith(m.logger, slog.String("topic", j.tp.Topic), slog.Int("partition", int(j.tp.Partition))),
			Now:            m.opts.Now,
			Files:          m.files,
			Stats:          m.opts.Stats,
		}
		if j.man != nil {
			if j.log, j.err = open(opts, j.man); j.err == nil {
				dl.fromManif.Add(1)
			} else {
				m.logger.Warn("opening log from its files: its manifest entry does not match them", "dir", j.path, "err", j.err)
			}
		}
		if j.log == nil {
			j.log, j.err = Open(opts)
		}
		n := dl.done.Add(1)
		if total := int64(len(dl.jobs)); total >= 1000 && n*10/total != (n-1)*10/total {
			m.logger.Info("loading logs", "dir", dl.d.path, "loaded", n, "total", total, "clean_shutdown", dl.clean, "elapsed", time.Since(dl.start))
		}
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range jobs {
		if j.log == nil && j.err == nil {
			continue // stopped before it was opened
		}
		delete(m.pending, j.tp)
		if j.err != nil {
			// One log that cannot be opened does not stop the node: it
			// is offline (KAFKA_STORAGE_ERROR) until a restart opens it.
			m.logger.Error("log offline: opening it failed", "topic", j.tp.Topic, "partition", j.tp.Partition, "dir", j.path, "err", j.err)
			m.offline[j.tp] = offlineLog{dir: dl.d, path: j.path, err: j.err}
			dl.offline++
			continue
		}
		l := j.log
		if off, ok := dl.cleaned[j.tp]; ok {
			l.SetCleanerCheckpoint(off)
		}
		m.adopt(l)
		m.adoptFlush(l)
		m.watchIO(l, j.tp, dl.d)
		m.logs[j.tp] = &managedLog{log: l, dir: dl.d}
		m.perDir[dl.d]++
	}
	return !stopped.Load()
}

// dropMarker removes dl's clean-shutdown marker, if any, and makes that
// and the manifest's removal durable, before the first write: from now on
// a crash must recover from the checkpoints. The manifest describes the
// logs as they were closed, and is never read again.
func (m *Manager) dropMarker(dl *dirLoad) error {
	if dl.clean {
		if err := m.fsys.Remove(filepath.Join(dl.d.path, CleanShutdownFile)); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
	}
	if dl.clean || dl.removed {
		return syncDir(m.fsys, dl.d.path)
	}
	return nil
}

// logLoaded logs that every log found in dl's dir is loaded: logs counts
// those found, offline those of them that failed to open (logs created
// while they loaded are not counted).
func (m *Manager) logLoaded(dl *dirLoad) {
	m.mu.Lock()
	offline := dl.offline
	m.fromManifest += dl.fromManif.Load()
	m.mu.Unlock()
	threads := max(1, min(m.opts.RecoveryThreads, len(dl.jobs)))
	m.logger.Info("loaded log dir", "dir", dl.d.path, "logs", len(dl.jobs), "offline", offline, "clean_shutdown", dl.clean,
		"from_manifest", dl.fromManif.Load(), "threads", threads, "duration", time.Since(dl.start))
}

// readManifest reads and removes the ManifestFile of d, returning its
// entries by partition directory name when the dir was shut down cleanly
// (clean), the file decodes and its id is wantID, the one the
// clean-shutdown marker holds; removed reports that a file was removed
// (the caller fsyncs the dir before the first write). A manifest without
// the marker is stale (a shutdown that died between the two, a start
// that died after removing the marker), and so is one whose id is not the
// marker's (a marker written by a program that does not know manifests:
// an older Samsa run on the dir since). Neither is read. A corrupt or
// unreadable one is logged: every log is opened from its files then.
func (m *Manager) readManifest(d *logDir, clean bool, wantID string) (logs map[string]*logManifest, removed bool) {
	path := filepath.Join(d.path, ManifestFile)
	var data []byte
	var err error
	if clean {
		data, err = vfs.ReadFile(m.fsys, path)
	} else {
		_, err = m.fsys.Stat(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		if clean {
			m.logger.Info("no log manifest: opening every log from its files", "dir", d.path)
		}
		return nil, false
	}
	if rerr := m.fsys.Remove(path); rerr == nil {
		removed = true
	} else if !errors.Is(rerr, os.ErrNotExist) {
		// Left in place, it must not be trusted at the next start:
		// the marker goes before any write, and without it the
		// manifest is not read.
		m.logger.Warn("removing the log manifest failed", "dir", d.path, "err", rerr)
	}
	if !clean {
		m.logger.Info("ignoring the log manifest of a log dir not shut down cleanly", "dir", d.path)
		return nil, removed
	}
	if err != nil {
		m.logger.Warn("ignoring unreadable log manifest: opening every log from its files", "dir", d.path, "err", err)
		return nil, removed
	}
	id, _, entries, err := decodeManifest(data)
	if err != nil {
		m.logger.Warn("ignoring corrupt log manifest: opening every log from its files", "dir", d.path, "err", err)
		return nil, removed
	}
	if got := hex.EncodeToString(id[:]); got != wantID {
		m.logger.Warn("ignoring stale log manifest (not the one the clean shutdown marker names): opening every log from its files", "dir", d.path, "manifest_id", got, "marker_id", wantID)
		return nil, removed
	}
	logs = make(map[string]*logManifest, len(entries))
	for i := range entries {
		logs[entries[i].name] = &entries[i]
	}
	return logs, removed
}

// writeManifests writes the ManifestFile of each log dir from the entries
// of its closed logs (closeLogs encoded them), all with id, and returns
// the dirs whose manifest was written. Each is streamed to its file and
// fsynced once. A failed write is logged (that dir's next start opens its
// logs from their files).
func (m *Manager) writeManifests(id manifestID, perDir map[*logDir][][]byte) map[*logDir]bool {
	start := time.Now()
	written := map[*logDir]bool{}
	for _, d := range m.dirs {
		if d.loading.Load() {
			continue // Close marks it no clean shutdown
		}
		entries := perDir[d]
		h := make([]byte, manifestHeaderSize)
		putManifestHeader(h, id, len(entries))
		crc := crc32.Update(0, castagnoli, h[12:])
		size := len(h)
		for _, e := range entries {
			crc = crc32.Update(crc, castagnoli, e)
			size += len(e)
		}
		binary.BigEndian.PutUint32(h[8:], crc)
		err := writeFileFunc(m.fsys, filepath.Join(d.path, ManifestFile), true, func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<20)
			bw.Write(h) // a bufio.Writer keeps its first error for Flush
			for _, e := range entries {
				bw.Write(e)
			}
			return bw.Flush()
		})
		if err != nil {
			m.logger.Warn("writing the log manifest failed: the next start opens every log from its files", "dir", d.path, "err", err)
			continue
		}
		written[d] = true
		m.logger.Info("wrote log manifest", "dir", d.path, "logs", len(entries), "bytes", size, "duration", time.Since(start))
	}
	return written
}

// removeInBackground removes directory trees, one after the other, on one
// goroutine that Close waits for.
func (m *Manager) removeInBackground(paths []string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for _, path := range paths {
			if err := m.fsys.RemoveAll(path); err != nil {
				m.logger.Error("removing deleted partition failed", "dir", path, "err", err)
				continue
			}
			m.logger.Info("removed deleted partition", "dir", path)
		}
	}()
}

// Files is the cache of the logs' segment file descriptors.
func (m *Manager) Files() *FileCache { return m.files }

// ClusterID is the cluster id of the log dirs.
func (m *Manager) ClusterID() string { return m.clusterID }

// NodeID is the node id the log dirs belong to.
func (m *Manager) NodeID() int32 { return m.opts.NodeID }

// DirectoryIDs maps each log dir to its directory.id (KIP-858).
func (m *Manager) DirectoryIDs() map[string]string {
	out := make(map[string]string, len(m.dirs))
	for _, d := range m.dirs {
		out[d.path] = d.dirID
	}
	return out
}

// Offline returns why the log of tp failed to load (wrapping ErrOffline),
// or nil when it did not fail.
func (m *Manager) Offline(tp TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.offline[tp]; ok {
		return fmt.Errorf("%w: %s: %w", ErrOffline, tp, o.err)
	}
	return nil
}

// OfflineDirs maps each log dir an I/O error took offline (a failed
// write, fsync, roll or checkpoint of any log in it, as Kafka's
// LogDirFailureChannel) to that error. An offline dir stays offline until
// the Manager is opened again: every log in it refuses writes with an
// error wrapping ErrOffline, and Create places no new log in it.
func (m *Manager) OfflineDirs() map[string]error {
	out := map[string]error{}
	for _, d := range m.dirs {
		if p := d.offline.Load(); p != nil {
			out[d.path] = *p
		}
	}
	return out
}

// OfflineDirIDs returns the directory.id of every offline log dir.
func (m *Manager) OfflineDirIDs() []string {
	var out []string
	for _, d := range m.dirs {
		if d.offline.Load() != nil {
			out = append(out, d.dirID)
		}
	}
	return out
}

// metadataTopic is the raft metadata log's topic (quorum.MetadataTopic).
const metadataTopic = "__cluster_metadata"

// watchIO makes an I/O error of l, the log of tp, take its dir d offline,
// and d going offline fail l's writes. The metadata log
// (__cluster_metadata, Kafka's metadata.log.dir) fails only on its own
// errors: the node may still commit the records that move its
// leaderships away before it halts (docs/reliability.md).
func (m *Manager) watchIO(l *Log, tp TopicPartition, d *logDir) {
	fn := func(err error) { m.dirFailed(d, err) }
	l.ioFailed.Store(&fn)
	if tp.Topic != metadataTopic {
		l.dirOffline.Store(&d.offline)
	}
}

// DirFailed takes the log dir at path (a dir of the Manager, as
// filepath.Dir of a Log.Dir in it) offline after err, an I/O error of a
// file there that another package writes (the replica manager's
// replication-offset-checkpoint), as Kafka's
// CheckpointFileWithFailureHandler reports to LogDirFailureChannel. As
// for the Manager's own checkpoints, ENOSPC (the previous file stays in
// place) and errors that are not the filesystem's leave the dir online.
// It reports whether the dir is offline now (with err nil it only tells
// that). Safe for concurrent use.
func (m *Manager) DirFailed(path string, err error) bool {
	path = filepath.Clean(path)
	for _, d := range m.dirs {
		if filepath.Clean(d.path) != path {
			continue
		}
		if err != nil && !errors.Is(err, syscall.ENOSPC) && isIOError(err) {
			m.dirFailed(d, err)
		}
		return d.offline.Load() != nil
	}
	return false
}

// dirFailed takes log dir d offline after err, an I/O error of one of its
// files (Kafka's LogDirFailureChannel.maybeAddOfflineLogDir): every log in
// it refuses writes from now on (watchIO) and OnDirOffline is told, once.
// It takes no lock: it runs with the failing log's lock held, and Delete
// closes a log under m.mu.
func (m *Manager) dirFailed(d *logDir, err error) {
	off := fmt.Errorf("%w: log dir %s: %w", ErrOffline, d.path, err)
	if !d.offline.CompareAndSwap(nil, &off) {
		return
	}
	all := true
	for _, o := range m.dirs {
		all = all && o.offline.Load() != nil
	}
	m.logger.Error("log dir offline after an I/O error: its partitions stop serving until restart", "dir", d.path, "directory_id", d.dirID, "err", err)
	if fn := m.opts.OnDirOffline; fn != nil {
		fn(d.path, d.dirID, all)
	}
}

// OfflineCount is the number of logs that failed to load.
func (m *Manager) OfflineCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.offline)
}

// Get returns the log of tp, or nil when this node has none.
func (m *Manager) Get(tp TopicPartition) *Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ml := m.logs[tp]; ml != nil {
		return ml.log
	}
	return nil
}

// Logs returns every open log.
func (m *Manager) Logs() map[TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, ml := range m.logs {
		out[tp] = ml.log
	}
	return out
}

// appendLogs appends every open log to buf and returns it: the periodic
// passes over every log reuse one slice instead of copying the map of
// logs (Logs) each time.
func (m *Manager) appendLogs(buf []*Log) []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ml := range m.logs {
		buf = append(buf, ml.log)
	}
	return buf
}

// Create returns the log of tp, creating it empty with cfg in the log dir
// holding the fewest logs when it does not exist (Kafka's getOrCreateLog).
// Zero fields of cfg take ManagerOptions.Default's value, as topic configs
// inherit the broker's.
// An existing log is returned as is, its config unchanged. The files are
// made without holding the Manager's lock, so creations of different
// partitions run in parallel and Get, Logs and the background tasks do
// not wait for them; a Create or Delete of a partition being created
// waits for that creation. Errors: ErrInvalidPartition, ErrClosed, a
// Config.Validate error, I/O errors.
func (m *Manager) Create(tp TopicPartition, cfg Config) (*Log, error) {
	return m.CreateTopic(tp, [16]byte{}, cfg)
}

// CreateTopic is Create for a partition of the topic whose id is topicID
// (KIP-516): a new log gets a partition.metadata naming it, written with
// its other files (no fsync: see Log.SetTopicID). An existing log of tp
// that names another topic id is the log of a deleted topic of the same
// name (a deletion whose apply a crash cut short): it is deleted first
// (as Delete does) and a new, empty log created, as Kafka never hosts a
// partition on a log of another topic id. An existing log without a
// topic id (an older data dir) takes topicID. A zero topicID is Create:
// no file is written and no id checked. A log of tp deleted since the
// checkpoints were last written (DeleteBatch leaves them) has them written
// first, so that a crash never loads the new log with the deleted one's
// recovery point and log start offset. Errors: Create's, and I/O errors
// of reading or writing partition.metadata, of the deletion.
func (m *Manager) CreateTopic(tp TopicPartition, topicID [16]byte, cfg Config) (*Log, error) {
	if topicID != ([16]byte{}) {
		if err := m.replaceOtherTopic(tp, topicID); err != nil {
			return nil, err
		}
	}
	if err := ValidTopic(tp.Topic); err != nil || tp.Partition < 0 {
		return nil, fmt.Errorf("%w: %q %d", ErrInvalidPartition, tp.Topic, tp.Partition)
	}
	m.mu.Lock()
	if err := m.awaitLoadLocked(tp); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if err := m.awaitCreationLocked(tp); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if ml := m.logs[tp]; ml != nil {
		m.mu.Unlock()
		return ml.log, nil
	}
	if o, ok := m.offline[tp]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: %w", ErrOffline, tp, o.err)
	}
	var d *logDir
	for _, c := range m.dirs {
		if c.offline.Load() == nil && (d == nil || m.perDir[c] < m.perDir[d]) {
			d = c
		}
	}
	if d == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: every log dir is offline", ErrOffline, tp)
	}
	// Counted in its dir from now, so that parallel creations spread.
	m.perDir[d]++
	done := make(chan struct{})
	m.creating[tp] = done
	m.mu.Unlock()
	dir := filepath.Join(d.path, tp.String())
	if err := m.checkpointDropped(d, tp); err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.creating, tp)
		close(done)
		m.perDir[d]--
		return nil, fmt.Errorf("storage: create %s: writing the checkpoints without its deleted log: %w", tp, err)
	}
	l, err := Open(OpenOptions{
		Dir:    dir,
		Config: cfg.Inherit(m.opts.Default),
		Logger: lazyWith(m.logger, slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition))),
		Now:    m.opts.Now,
		Files:  m.files,
		Stats:  m.opts.Stats,
	})
	if err == nil && topicID != ([16]byte{}) {
		if err = l.initTopicID(topicID); err != nil {
			l.closeDiscarding()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creating, tp)
	close(done)
	if err == nil && m.closed {
		l.Close()
		err = ErrClosed
	}
	if err != nil {
		m.perDir[d]--
		return nil, err
	}
	// The new directory's entry in the log dir is made durable by the
	// log's first flush, or before by the next checkpoint or clean
	// shutdown (each syncs the log dir): one fsync per partition
	// created was minutes at 100,000 partitions.
	d.unsynced.Store(true)
	sync := func() error { return m.syncLogDir(d) }
	l.parentSync.Store(&sync)
	m.adopt(l)
	m.adoptFlush(l)
	m.watchIO(l, tp, d)
	m.logs[tp] = &managedLog{log: l, dir: d}
	m.logger.Info("created log", "topic", tp.Topic, "partition", tp.Partition, "dir", dir)
	return l, nil
}

// replaceOtherTopic deletes the log of tp when its partition.metadata
// names a topic id other than id, and gives a log without one id.
func (m *Manager) replaceOtherTopic(tp TopicPartition, id [16]byte) error {
	l := m.Get(tp)
	if l == nil {
		return nil
	}
	had, ok, err := l.TopicID()
	if err != nil {
		return err
	}
	if !ok {
		return l.SetTopicID(id)
	}
	if had == id {
		return nil
	}
	m.logger.Warn("deleting the log of another topic of the same name (a deleted topic's)", "topic", tp.Topic, "partition", tp.Partition,
		"log_topic_id", base64.RawURLEncoding.EncodeToString(had[:]), "topic_id", base64.RawURLEncoding.EncodeToString(id[:]))
	return m.DeleteBatch([]TopicPartition{tp})[0]
}

// awaitCreationLocked waits, releasing m.mu meanwhile, until no Create of
// tp is under way; ErrClosed once the Manager is closed.
func (m *Manager) awaitCreationLocked(tp TopicPartition) error {
	for {
		if m.closed {
			return ErrClosed
		}
		done, ok := m.creating[tp]
		if !ok {
			return nil
		}
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
}

// awaitLoadLocked waits, releasing m.mu meanwhile, until tp is not a log
// still to be loaded in the background (its directory exists: creating
// or deleting it now would race with its load); ErrClosed once the
// Manager is closed.
func (m *Manager) awaitLoadLocked(tp TopicPartition) error {
	for m.pending[tp] && !m.closed {
		m.mu.Unlock()
		select {
		case <-m.loaded:
		case <-m.stop:
		}
		m.mu.Lock()
	}
	if m.closed {
		return ErrClosed
	}
	return nil
}

// deletedDirName is <topic>-<partition>.<uuid>-delete with the topic cut
// so that the name fits in 255 bytes (a topic name may be 249 characters;
// Kafka shortens it the same way).
func deletedDirName(tp TopicPartition, id [16]byte) string {
	suffix := "-" + strconv.Itoa(int(tp.Partition)) + "." + hex.EncodeToString(id[:]) + deleteSuffix
	topic := tp.Topic
	if len(topic)+len(suffix) > 255 {
		topic = topic[:255-len(suffix)]
	}
	return topic + suffix
}

// Delete closes the log of tp and removes it from disk: the directory is
// first renamed to <topic>-<partition>.<uuid>-delete (so a crash never
// leaves a half-removed log that would be loaded again), then removed in
// the background. Deleting a partition without a log does nothing.
// Errors: ErrClosed, I/O errors of the rename or of the log dir's fsync.
func (m *Manager) Delete(tp TopicPartition) error {
	return m.DeleteBatch([]TopicPartition{tp})[0]
}

// deleteChunk bounds the partitions DeleteBatch renames under one hold of
// the Manager's lock: Get, Create and the periodic tasks take it.
const deleteChunk = 512

// DeleteBatch is Delete for each of tps (a metadata commit deleting
// topics): each log is closed without a flush or producer snapshot (its
// records go with it) and its directory renamed, deleteChunk partitions
// under one hold of the Manager's lock; then each log dir that renamed one
// is fsynced once, not once per partition (10,000 deletions were 10,000
// directory fsyncs in the metadata apply), and one background goroutine
// removes the renamed directories. The recovery-point, log-start-offset
// and cleaner-offset checkpoints are written without them by the next
// checkpoint (periodic, at Close, or by a Create of one of them, before
// it makes the new log: see CreateTopic), not by each DeleteBatch.
// Kafka's LogManager.asyncDelete also renames inline and leaves the
// removal to a later task, but checkpoints the dirs at each deletion. A tp whose log is
// being created waits for that creation, one still to be loaded in the
// background for the load. It returns one error per tp, nil
// when deleted or without a log: ErrClosed, I/O errors of the rename or
// the fsync. Safe for concurrent use.
func (m *Manager) DeleteBatch(tps []TopicPartition) []error {
	errs := make([]error, len(tps))
	var renamed []string
	dirs := map[*logDir][]int{} // the indexes of tps renamed in each dir
	for lo := 0; lo < len(tps); lo += deleteChunk {
		m.mu.Lock()
		for i := lo; i < min(lo+deleteChunk, len(tps)); i++ {
			// The lock is held until the directory is renamed, so
			// that a Create of the same partition cannot open the
			// directory being deleted.
			d, target, err := m.renameForDeleteLocked(tps[i])
			if err != nil {
				errs[i] = err
			} else if d != nil {
				renamed = append(renamed, target)
				dirs[d] = append(dirs[d], i)
			}
		}
		m.mu.Unlock()
	}
	for d, idx := range dirs {
		// A failed fsync leaves the rename maybe undone by a crash:
		// the partition is recorded dropped all the same (a Create of
		// it writes the checkpoints first, which costs nothing else).
		if err := syncDir(m.fsys, d.path); err != nil {
			for _, i := range idx {
				errs[i] = err
			}
		}
	}
	m.mu.Lock()
	closed := m.closed
	if len(renamed) > 0 && !closed {
		// Else Close may be waiting for the removals already: the
		// next start removes these directories.
		m.removeInBackground(renamed)
	}
	m.mu.Unlock()
	// The checkpoint files still name the deleted partitions until the
	// next checkpoint (periodic, or at Close). A directory of theirs
	// left by a crash ends in -delete and is not loaded; a partition of
	// the same name created again before then has them written first
	// (CreateTopic), so that a crash never loads its new log with the
	// deleted one's recovery point and log start offset. Kafka's
	// LogManager.asyncDelete checkpoints the dirs at each deletion: at
	// 20,000 partitions that was 0.6 MB written and four fsyncs for
	// each DeleteTopics applied.
	return errs
}

// renameForDeleteLocked takes tp out of the Manager, closes its log and
// renames its directory for deletion; it returns the log dir and the new
// path, or a nil dir when tp has no log (loaded or offline).
func (m *Manager) renameForDeleteLocked(tp TopicPartition) (*logDir, string, error) {
	if err := m.awaitLoadLocked(tp); err != nil {
		return nil, "", err
	}
	if err := m.awaitCreationLocked(tp); err != nil {
		return nil, "", err
	}
	var d *logDir
	var path string
	if ml := m.logs[tp]; ml != nil {
		delete(m.logs, tp)
		m.perDir[ml.dir]--
		m.ckptMoved.Store(true)
		// Not flushed: its files go (an fsync or two a partition
		// held the metadata listener for seconds per thousand
		// deleted partitions).
		if err := ml.log.closeDiscarding(); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Warn("close before delete failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		d, path = ml.dir, ml.log.Dir()
	} else if o, ok := m.offline[tp]; ok {
		// A log that failed to load goes with its topic all the same.
		delete(m.offline, tp)
		d, path = o.dir, o.path
	} else {
		return nil, "", nil
	}
	if m.dropped == nil {
		m.dropped = map[droppedLog]struct{}{}
	}
	// Before the rename: a failed rename may have happened all the same.
	m.dropped[droppedLog{d, tp}] = struct{}{}
	m.ckptMoved.Store(true)
	target := filepath.Join(d.path, deletedDirName(tp, newDeleteID()))
	if err := m.fsys.Rename(path, target); err != nil {
		return nil, "", fmt.Errorf("storage: delete %s: %w", tp, err)
	}
	m.logger.Info("deleted log", "topic", tp.Topic, "partition", tp.Partition)
	return d, target, nil
}

func newDeleteID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	return id
}

// Checkpoint writes each log dir's recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and cleaner-offset-checkpoint from the open
// logs, unless no log's offsets moved and no log came or went since the
// last ones written (Kafka rewrites them at every interval; at 100,000
// idle logs that was three files of 2.6 MB a minute saying the same).
// Errors: ErrClosed, I/O errors (joined over the dirs).
func (m *Manager) Checkpoint() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.mu.Unlock()
	return m.checkpoint()
}

func (m *Manager) checkpoint() error {
	m.ckMu.Lock()
	defer m.ckMu.Unlock()
	if !m.ckptMoved.Swap(false) {
		return nil // the files hold what they would be written with
	}
	m.mu.Lock()
	entries := map[*logDir][]dirCheckpointEntry{}
	for tp, ml := range m.logs {
		entries[ml.dir] = append(entries[ml.dir], dirCheckpointEntry{tp: tp, recoveryPoint: ml.log.RecoveryPoint(),
			logStartOffset: ml.log.LogStartOffset(), cleanerOffset: max(-1, ml.log.CleanerCheckpoint())})
	}
	// The files written from entries name none of these any more.
	dropped := m.dropped
	m.dropped = nil
	m.mu.Unlock()
	unwritten := map[*logDir]bool{}
	defer func() { m.keepDropped(dropped, unwritten) }()
	var errs []error
	for _, d := range m.dirs {
		if d.offline.Load() != nil {
			// Its checkpoints stay as they were: recovery at the
			// next start reads them.
			continue
		}
		if d.loading.Load() {
			// Written without the logs still to be loaded, they
			// would lose their recovery points and start offsets;
			// the files hold what they were opened with.
			m.ckptMoved.Store(true)
			unwritten[d] = true
			continue
		}
		err := writeDirCheckpoints(m.fsys, d.path, entries[d])
		if err != nil && !errors.Is(err, syscall.ENOSPC) && !outOfDescriptors(err) {
			// A full disk, or a process out of descriptors (clients
			// holding every one the limit allows), leaves the last
			// checkpoint in place (written to a temporary file, then
			// renamed) and says nothing of the disk: the next
			// checkpoint tries again.
			m.dirFailed(d, err)
		}
		if err != nil {
			m.ckptMoved.Store(true) // tried again next time
			unwritten[d] = true
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// droppedLog is a partition deleted from a log dir (Manager.dropped).
type droppedLog struct {
	d  *logDir
	tp TopicPartition
}

// keepDropped puts back into m.dropped the partitions of dropped, taken
// by a checkpoint, whose dir's files it did not write (unwritten).
func (m *Manager) keepDropped(dropped map[droppedLog]struct{}, unwritten map[*logDir]bool) {
	if len(unwritten) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range dropped {
		if unwritten[k.d] {
			if m.dropped == nil {
				m.dropped = map[droppedLog]struct{}{}
			}
			m.dropped[k] = struct{}{}
		}
	}
}

// checkpointDropped writes the checkpoints when d's files may still name
// tp, deleted from d since they were last written (DeleteBatch leaves
// them), before a new log of tp is made in d: a crash must never load
// the new log with the deleted one's recovery point and log start
// offset. A dir still loading in the background is not written (as
// before the deletions were coalesced: see checkpoint). Errors: the
// checkpoint's.
func (m *Manager) checkpointDropped(d *logDir, tp TopicPartition) error {
	m.mu.Lock()
	_, stale := m.dropped[droppedLog{d, tp}]
	m.mu.Unlock()
	if !stale {
		return nil
	}
	return m.checkpoint()
}

// outOfDescriptors reports EMFILE or ENFILE: the process or the system is
// out of file descriptors, a condition of the process, not of its disk.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// MaybeRoll rolls every log whose active segment is older than its
// segment.ms (call it periodically). Errors are joined.
func (m *Manager) MaybeRoll() error {
	var errs []error
	for _, l := range m.appendLogs(nil) {
		if err := l.MaybeRoll(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Flush flushes every log now. Errors are joined.
func (m *Manager) Flush() error {
	var errs []error
	for _, l := range m.Logs() {
		if err := l.Flush(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetBrokerEpoch sets the broker epoch that Close writes into each log
// dir's CleanShutdownFile (KIP-966: the next process of the broker shows it
// in its BrokerRegistration as PreviousBrokerEpoch, proof that its logs
// were closed cleanly). -1, the default, proves nothing. Safe for
// concurrent use.
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// CleanShutdownBrokerEpoch returns the broker epoch that every log dir's
// CleanShutdownFile held at open (see SetBrokerEpoch), or -1 when a dir was
// not shut down cleanly, the files disagree or hold none.
func (m *Manager) CleanShutdownBrokerEpoch() int64 { return m.cleanEpoch }

// Close flushes and closes every log, writes the checkpoints, marks each
// log dir cleanly shut down (so the next open skips recovery) and waits for
// background removals. A background load (ManagerOptions.Background) stops
// after the logs being opened: a dir with logs it did not load keeps the
// checkpoints it was opened with and gets no manifest nor clean-shutdown
// marker (the next start recovers it). Later calls give ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.loadWG.Wait()
	m.stopTasks()
	manifests, err := m.closeLogs()
	if cerr := m.checkpoint(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		// The manifests first: each is trusted only with the marker
		// written after it, which names it.
		var id manifestID
		rand.Read(id[:]) // never fails (crypto/rand)
		written := m.writeManifests(id, manifests)
		for _, d := range m.dirs {
			if d.loading.Load() {
				m.logger.Info("not marking the log dir cleanly shut down: some of its logs were never loaded", "dir", d.path)
				continue
			}
			var mid string
			if written[d] {
				mid = hex.EncodeToString(id[:])
			}
			marker := encodeCleanShutdown(m.brokerEpoch.Load(), mid)
			err = errors.Join(err, writeFile(m.fsys, filepath.Join(d.path, CleanShutdownFile), marker, true))
		}
	}
	m.wg.Wait()
	m.unlockDirs()
	return err
}

// closeLogs closes every log, RecoveryThreads per log dir at a time (Kafka
// shuts its logs down on num.recovery.threads.per.data.dir threads).
// Rather than fsync each log's files (three or more fsyncs a log: at
// 6,600 partitions 8.8 s), it stops them all, makes each log dir durable
// with one syncfs(2), and closes them as flushed to their end; when
// syncfs fails, each log is fsynced as Log.Close does. The same workers
// encode each closed log's entry of its dir's ManifestFile, returned by
// dir (a log that the next start must open from its files has none).
func (m *Manager) closeLogs() (manifests map[*logDir][][]byte, _ error) {
	m.mu.Lock()
	type entry struct {
		tp       TopicPartition
		log      *Log
		dir      *logDir
		err      error
		ok       bool
		manifest []byte // nil: none
	}
	entries := make([]*entry, 0, len(m.logs))
	for tp, ml := range m.logs {
		entries = append(entries, &entry{tp: tp, log: ml.log, dir: ml.dir})
	}
	m.mu.Unlock()
	start := time.Now()
	parallel.For(m.opts.RecoveryThreads*len(m.dirs), len(entries), func(i int) {
		e := entries[i]
		e.ok, e.err = e.log.beginClose()
	})
	synced := true
	for _, d := range m.dirs {
		if err := m.fsys.SyncFS(d.path); err != nil {
			m.logger.Warn("syncfs failed: fsyncing each log instead", "dir", d.path, "err", err)
			synced = false
		}
	}
	var scratch sync.Pool
	parallel.For(m.opts.RecoveryThreads*len(m.dirs), len(entries), func(i int) {
		e := entries[i]
		if !e.ok {
			return
		}
		e.err = errors.Join(e.err, e.log.endClose(!synced))
		sc, _ := scratch.Get().(*manifestScratch)
		if sc == nil {
			sc = new(manifestScratch)
		}
		e.manifest, _ = e.log.appendManifest(nil, e.tp.String(), sc)
		scratch.Put(sc)
	})
	var errs []error
	manifests = map[*logDir][][]byte{}
	for _, e := range entries {
		if e.err != nil && !errors.Is(e.err, ErrClosed) {
			errs = append(errs, fmt.Errorf("storage: close %s: %w", e.tp, e.err))
		}
		if e.manifest != nil {
			manifests[e.dir] = append(manifests[e.dir], e.manifest)
		}
	}
	m.logger.Info("closed logs", "logs", len(entries), "duration", time.Since(start))
	return manifests, errors.Join(errs...)
}
