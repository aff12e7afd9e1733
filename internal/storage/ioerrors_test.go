package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// appendFault is one file an append (or the roll before it) writes
// through, and how to make the append reach it.
type appendFault struct {
	name  string
	kinds errorfs.Kind
	path  string // the failing file's name contains it
	// prepare appends what the log needs first; next returns the batch
	// whose append meets the fault and its leader epoch.
	prepare func(t *testing.T, l *Log, a *appended)
	next    func(t *testing.T) ([]byte, int32)
	// skipped: the append succeeds without the file (a sparse index
	// entry); otherwise it is refused whole.
	skipped bool
}

// faultCases are the files beside a segment's .log that an append
// writes: the new segment and the producer snapshot of a roll, the
// leader-epoch checkpoint of a new epoch, the .txnindex entry of an
// abort, an offset index entry.
func faultCases() []appendFault {
	plain := func(t *testing.T, l *Log, a *appended) {
		t.Helper()
		b := testBatch(t, 1, 1000, "first")
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		a.batches = append(a.batches, b)
	}
	return []appendFault{
		{name: "roll segment", kinds: errorfs.OpOpen, path: ".log", prepare: plain,
			next: func(t *testing.T) ([]byte, int32) { return testBatch(t, 1, 2000, "next"), 0 }},
		{name: "roll producer snapshot", kinds: errorfs.OpOpen, path: ".snapshot", prepare: plain,
			next: func(t *testing.T) ([]byte, int32) { return testBatch(t, 1, 2000, "next"), 0 }},
		{name: "leader epoch checkpoint", kinds: errorfs.OpOpen, path: LeaderEpochCheckpointFile, prepare: plain,
			next: func(t *testing.T) ([]byte, int32) { return testBatch(t, 1, 2000, "next"), 1 }},
		{name: "txnindex", kinds: errorfs.OpOpen, path: txnIndexSuffix,
			prepare: func(t *testing.T, l *Log, a *appended) {
				t.Helper()
				b := pidBatch(t, 7, 0, 0, 1, true)
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
				a.batches = append(a.batches, b)
			},
			next: func(t *testing.T) ([]byte, int32) { return markerBatch(t, 7, 0, 0, false), 0 }},
		{name: "offset index", kinds: errorfs.OpOpen, path: indexSuffix, prepare: plain, skipped: true,
			next: func(t *testing.T) ([]byte, int32) { return testBatch(t, 1, 2000, "next"), 0 }},
	}
}

// faultLog opens a Manager on dir through fault and creates a log whose
// second batch rolls (segment.bytes 100) or, for the offset index case,
// gets an index entry (index.interval.bytes 1).
func faultLog(t *testing.T, dir string, fault errorfs.Injector, c appendFault) (*Manager, *Log) {
	t.Helper()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fault), RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cfg := Config{SegmentBytes: 100}
	if c.path == indexSuffix || c.path == txnIndexSuffix || c.path == LeaderEpochCheckpointFile {
		cfg = Config{IndexIntervalBytes: 1}
	}
	l := mustCreate(t, m, "a", cfg)
	return m, l
}

// TestAppendOutOfResources: an append (or its roll) that cannot open or
// write a file beside the segment for want of descriptors (EMFILE,
// ENFILE) or space (ENOSPC) is refused whole with ErrResourceExhausted:
// the log end, the segments, the files on disk, the epoch history and
// the aborted transactions are as before, the dir stays online, and the
// same append succeeds once the resource returns, and survives a
// restart. Kafka takes the dir offline on any of these (an IOException
// to LogDirFailureChannel). A skipped offset index entry does not refuse
// the append: the index is sparse.
func TestAppendOutOfResources(t *testing.T) {
	for _, c := range faultCases() {
		for _, errno := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC} {
			kinds := c.kinds
			if errno == syscall.ENOSPC {
				kinds = errorfs.OpWrite // a full disk fails writes, not opens
			}
			t.Run(c.name+"/"+errno.Error(), func(t *testing.T) {
				dir := t.TempDir()
				fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: kinds, PathContains: c.path}, Err: errno}
				m, l := faultLog(t, dir, fail, c)
				var a appended
				c.prepare(t, l, &a)
				leo, segs := l.LogEndOffset(), len(l.segments())
				epochs := l.EpochHistory()
				files := segmentFiles(t, l.Dir(), logSuffix)

				fail.Set(true)
				b, epoch := c.next(t)
				_, err := l.Append(b, epoch)
				fail.Set(false)
				if fail.Count() == 0 {
					t.Fatal("the append never reached the failing file")
				}
				if len(m.OfflineDirs()) != 0 {
					t.Fatalf("dir offline after %v: %v", errno, m.OfflineDirs())
				}
				if c.skipped {
					if err != nil {
						t.Fatalf("append with the index entry failing: %v, want it to skip the entry", err)
					}
					a.batches = append(a.batches, b)
				} else {
					if !errors.Is(err, ErrResourceExhausted) || !errors.Is(err, errno) {
						t.Fatalf("append: %v, want ErrResourceExhausted wrapping %v", err, errno)
					}
					// A roll that succeeded before the batch's own write
					// failed (ENOSPC on the new .log) leaves an empty
					// active segment at the log end: a whole roll.
					rolled := 0
					if now := l.segments(); len(now) == segs+1 && now[segs].size.Load() == 0 && now[segs].baseOffset == leo {
						rolled = 1
					}
					if l.LogEndOffset() != leo || len(l.segments()) != segs+rolled {
						t.Fatalf("refused append changed the log: end %d -> %d, segments %d -> %d", leo, l.LogEndOffset(), segs, len(l.segments()))
					}
					if got := segmentFiles(t, l.Dir(), logSuffix); len(got) != len(files)+rolled {
						t.Fatalf("refused append left segment files %v, had %v", got, files)
					}
					if got := l.EpochHistory(); len(got) != len(epochs) {
						t.Fatalf("refused append changed the epochs: %v -> %v", epochs, got)
					}
					if txns, err := l.AbortedTransactions(0, 1<<40); err != nil || len(txns) != 0 {
						t.Fatalf("refused append left aborted transactions %v (%v)", txns, err)
					}
					b, epoch = c.next(t)
					if _, err := l.Append(b, epoch); err != nil {
						t.Fatalf("append once the resource is back: %v", err)
					}
					a.batches = append(a.batches, b)
				}
				if got := readAllLog(t, l); !bytes.Equal(got, a.all()) {
					t.Fatalf("log holds %d bytes, want the %d appended", len(got), len(a.all()))
				}
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				m2, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer m2.Close()
				l2 := m2.Get(TopicPartition{"a", 0})
				if got := readAllLog(t, l2); !bytes.Equal(got, a.all()) {
					t.Fatalf("after a restart the log holds %d bytes, want the %d appended", len(got), len(a.all()))
				}
				if c.path == txnIndexSuffix {
					if txns, err := l2.AbortedTransactions(0, 1<<40); err != nil || len(txns) != 1 {
						t.Fatalf("after a restart: aborted transactions %v (%v), want one", txns, err)
					}
				}
			})
		}
	}
}

// TestAppendIOErrorOffline: an I/O error (EIO) writing any file of an
// append takes the log dir offline, as Kafka's append does (an
// IOException to LogDirFailureChannel): the append fails with
// ErrOffline and so does the next. Before, a failed index entry, producer
// snapshot, leader-epoch checkpoint or .txnindex entry was only logged.
func TestAppendIOErrorOffline(t *testing.T) {
	for _, c := range faultCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpWrite, PathContains: c.path}, Err: syscall.EIO}
			m, l := faultLog(t, dir, fail, c)
			var a appended
			c.prepare(t, l, &a)
			fail.Set(true)
			b, epoch := c.next(t)
			_, err := l.Append(b, epoch)
			fail.Set(false)
			if !errors.Is(err, ErrOffline) {
				t.Fatalf("append with %s writes failing: %v, want ErrOffline", c.path, err)
			}
			if _, ok := m.OfflineDirs()[dir]; !ok {
				t.Fatalf("offline dirs %v, want %s", m.OfflineDirs(), dir)
			}
			b, epoch = c.next(t)
			if _, err := l.Append(b, epoch); !errors.Is(err, ErrOffline) {
				t.Fatalf("next append: %v, want ErrOffline", err)
			}
		})
	}
}

// TestTruncateEpochCheckpointOutOfDescriptors: a truncation whose
// leader-epoch checkpoint cannot be replaced for want of descriptors
// leaves the file with an epoch past the new log end; the next append,
// in an older epoch, replaces it, so that after a restart the history
// does not claim the newer epoch starts inside the log.
func TestTruncateEpochCheckpointOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpOpen, PathContains: LeaderEpochCheckpointFile}, Err: syscall.EMFILE}
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fail), RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Close() }()
	l := mustCreate(t, m, "a", Config{})
	for i, epoch := range []int32{3, 3, 5} {
		if _, err := l.AppendAsFollower(withEpoch(t, int64(i), epoch)); err != nil {
			t.Fatal(err)
		}
	}
	fail.Set(true)
	if err := l.Truncate(2); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	fail.Set(false)
	if len(m.OfflineDirs()) != 0 {
		t.Fatalf("dir offline: %v", m.OfflineDirs())
	}
	// The leader wrote offsets 2 and 3 in epoch 3.
	for i := int64(2); i < 4; i++ {
		if _, err := l.AppendAsFollower(withEpoch(t, i, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Get(TopicPartition{"a", 0}).EpochHistory(); len(got) != 1 || got[0] != (EpochEntry{3, 0}) {
		t.Fatalf("epoch history after a restart: %v, want [{3 0}]", got)
	}
}

// withEpoch is a one-record batch at offset with partition leader epoch
// epoch, as a follower receives it.
func withEpoch(t *testing.T, offset int64, epoch int32) []byte {
	t.Helper()
	b := testBatch(t, 1, 1000+offset, "f")
	record.SetBaseOffset(b, offset)
	record.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// TestCleanerIOError: the log cleaner as Kafka's LogCleaner.cleanLog:
// an I/O error (EIO) writing the cleaned segment takes the log's dir
// offline (it was logged and the log marked uncleanable); a lack of
// space (ENOSPC) leaves the dir online and the log as it was, without
// .cleaned files, and the cleaning is tried again after
// log.cleaner.backoff.ms (an hour here, in a synctest bubble) and
// succeeds once space is back (it was marked uncleanable until restart).
func TestCleanerIOError(t *testing.T) {
	for _, tc := range []struct {
		err     error
		offline bool
	}{{syscall.EIO, true}, {syscall.ENOSPC, false}} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpWrite, PathContains: cleanedSuffix}, Err: tc.err}
				fail.Set(true)
				m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fail),
					Cleaner: CleanerOptions{Backoff: time.Hour}, RollCheckInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				// The cleaner's first pass (no logs yet) ends; it then
				// sleeps until kicked.
				synctest.Wait()
				l, limit := managedDups(t, m, TopicPartition{Topic: "c", Partition: 0})
				// The cleaner runs when kicked (its backoff is an hour).
				m.KickCleaner()
				synctest.Wait()
				if fail.Count() == 0 {
					t.Fatal("the cleaner wrote no cleaned segment")
				}
				if _, off := m.OfflineDirs()[dir]; off != tc.offline {
					t.Fatalf("after %v cleaning: dir offline %v, want %v", tc.err, off, tc.offline)
				}
				if tc.offline {
					return
				}
				if got := segmentFiles(t, l.Dir(), cleanedSuffix); len(got) != 0 {
					t.Fatalf("cleaned files left: %v", got)
				}
				want := latest(readRecords(t, l), limit)
				fail.Set(false)
				time.Sleep(time.Hour)
				synctest.Wait()
				if l.CleanerCheckpoint() != limit {
					t.Fatalf("cleaner checkpoint %d once space is back, want %d", l.CleanerCheckpoint(), limit)
				}
				checkCompacted(t, l, limit, want)
			})
		})
	}
}

// TestFlushAndReadOutOfDescriptors: a flush that cannot open a file to
// fsync (the partition directory, a segment the FileCache closed) and a
// read that cannot reopen a segment file, for want of descriptors, fail
// with ErrResourceExhausted and leave the log and its dir as they were:
// no fsync failed and no byte was lost, so the next flush and read
// succeed. Both took the dir offline.
func TestFlushAndReadOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpOpen, PathContains: "a-0"}, Err: syscall.EMFILE}
	// One descriptor kept while idle: writing b's segment closes a's.
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fail), OpenFilesMax: 1, RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := mustCreate(t, m, "a", Config{})
	b := mustCreate(t, m, "b", Config{})
	batch := testBatch(t, 3, 1000, "x")
	if _, err := a.Append(batch, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(testBatch(t, 1, 1000, "y"), 0); err != nil {
		t.Fatal(err)
	}
	fail.Set(true)
	if err := a.Flush(); !errors.Is(err, ErrResourceExhausted) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("flush out of descriptors: %v, want ErrResourceExhausted wrapping EMFILE", err)
	}
	if a.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d after a flush that synced nothing", a.RecoveryPoint())
	}
	if _, err := a.Read(0, 1<<20, 1<<40, true); !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("read out of descriptors: %v, want ErrResourceExhausted", err)
	}
	fail.Set(false)
	if len(m.OfflineDirs()) != 0 {
		t.Fatalf("dir offline: %v", m.OfflineDirs())
	}
	if err := a.Flush(); err != nil {
		t.Fatalf("flush once descriptors are back: %v", err)
	}
	if a.RecoveryPoint() != 3 {
		t.Fatalf("recovery point %d, want 3", a.RecoveryPoint())
	}
	res, err := a.Read(0, 1<<20, 1<<40, true)
	if err != nil || !bytes.Equal(res.Records, batch) {
		t.Fatalf("read once descriptors are back: %d bytes, %v", len(res.Records), err)
	}
}

// TestAppendRealDescriptorExhaustion: descriptors really exhausted, in a
// child process whose RLIMIT_NOFILE is lowered (the way idle client
// connections exhaust a broker's): an append whose roll needs a new
// segment file is refused with ErrResourceExhausted wrapping EMFILE, the
// log dir stays online, and once descriptors are free again the same
// append succeeds.
func TestAppendRealDescriptorExhaustion(t *testing.T) {
	if dir := os.Getenv("SAMSA_TEST_EMFILE_DIR"); dir != "" {
		if err := exhaustAndAppend(dir); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ok")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAppendRealDescriptorExhaustion$")
	cmd.Env = append(os.Environ(), "SAMSA_TEST_EMFILE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// exhaustAndAppend is TestAppendRealDescriptorExhaustion's child.
func exhaustAndAppend(dir string) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = min(lim.Cur, 256)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, RollCheckInterval: -1})
	if err != nil {
		return err
	}
	defer m.Close()
	l, err := m.Create(TopicPartition{"a", 0}, Config{SegmentBytes: 100})
	if err != nil {
		return err
	}
	build := func(tag string) []byte {
		b, err := record.Build(record.Spec{BaseTimestamp: 1000, ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence},
			[]record.Record{{Key: []byte("k"), Value: []byte(tag)}})
		if err != nil {
			panic(err)
		}
		return b
	}
	if _, err := l.Append(build("first"), 0); err != nil {
		return err
	}
	// Take every descriptor left, as idle connections would.
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				return err
			}
			break
		}
		held = append(held, f)
	}
	_, err = l.Append(build("refused"), 0)
	if !errors.Is(err, ErrResourceExhausted) || !errors.Is(err, syscall.EMFILE) {
		return fmt.Errorf("append out of descriptors: %v, want ErrResourceExhausted wrapping EMFILE", err)
	}
	if len(m.OfflineDirs()) != 0 {
		return fmt.Errorf("dir offline: %v", m.OfflineDirs())
	}
	if l.LogEndOffset() != 1 || len(l.segments()) != 1 {
		return fmt.Errorf("refused append changed the log: end %d, %d segments", l.LogEndOffset(), len(l.segments()))
	}
	for _, f := range held {
		f.Close()
	}
	if _, err := l.Append(build("again"), 0); err != nil {
		return fmt.Errorf("append with descriptors back: %w", err)
	}
	if l.LogEndOffset() != 2 {
		return fmt.Errorf("log end %d, want 2", l.LogEndOffset())
	}
	return nil
}
