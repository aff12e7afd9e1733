package storage

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// TestLogDirOffline: an I/O error of one log's write takes its log dir
// offline (Kafka's LogDirFailureChannel): every log in the dir refuses
// writes with ErrOffline, OnDirOffline is told once (all: true for the
// only dir), Create places no new log there, and the checkpoints of the
// dir are no longer written. A full disk (ENOSPC) only refuses the write.
func TestLogDirOffline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		offline bool
	}{{"EIO", syscall.EIO, true}, {"ENOSPC", syscall.ENOSPC, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpWrite, PathContains: "a-0"}, Err: tc.err}
			var mu sync.Mutex
			var calls []bool
			m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fail),
				OnDirOffline: func(path, _ string, all bool) {
					mu.Lock()
					defer mu.Unlock()
					if path != dir {
						t.Errorf("OnDirOffline(%q), want %q", path, dir)
					}
					calls = append(calls, all)
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			a := mustCreate(t, m, "a", Config{})
			b := mustCreate(t, m, "b", Config{})
			if err := m.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			fail.Set(true)
			if _, err := a.Append(testBatch(t, 1, 0, "x"), 0); err == nil {
				t.Fatal("append with writes failing succeeded")
			}
			fail.Set(false)
			_, errA := a.Append(testBatch(t, 1, 0, "y"), 0)
			_, errB := b.Append(testBatch(t, 1, 0, "z"), 0)
			_, errC := m.Create(TopicPartition{"c", 0}, Config{})
			mu.Lock()
			got := calls
			mu.Unlock()
			if !tc.offline {
				if errA != nil || errB != nil || errC != nil || len(got) != 0 || len(m.OfflineDirs()) != 0 {
					t.Fatalf("after ENOSPC: appends %v, %v, create %v, OnDirOffline %v, offline %v: want all well", errA, errB, errC, got, m.OfflineDirs())
				}
				return
			}
			for _, err := range []error{errA, errB, errC} {
				if !errors.Is(err, ErrOffline) {
					t.Errorf("got %v, want ErrOffline", err)
				}
			}
			if len(got) != 1 || !got[0] {
				t.Fatalf("OnDirOffline calls %v, want one with all", got)
			}
			if ids := m.OfflineDirIDs(); len(ids) != 1 || ids[0] != m.DirectoryIDs()[dir] {
				t.Fatalf("OfflineDirIDs %v, want [%s]", ids, m.DirectoryIDs()[dir])
			}
			fi, err := vfs.Default.Stat(filepath.Join(dir, RecoveryPointCheckpointFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Checkpoint(); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if fi2, err := vfs.Default.Stat(filepath.Join(dir, RecoveryPointCheckpointFile)); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
				t.Fatalf("the offline dir's checkpoint was written again (%v)", err)
			}
		})
	}
}

// TestCheckpointOutOfDescriptors: a checkpoint that cannot open its
// temporary file because the process is out of descriptors (EMFILE: 500
// idle client connections under ulimit -n 1024 took a node's every
// descriptor for a minute) leaves the dir online and the last checkpoint
// in place; the next checkpoint writes. EIO still takes the dir offline.
func TestCheckpointOutOfDescriptors(t *testing.T) {
	for _, tc := range []struct {
		err     error
		offline bool
	}{{syscall.EMFILE, false}, {syscall.ENFILE, false}, {syscall.EIO, true}} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			dir := t.TempDir()
			fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpOpen, PathContains: "checkpoint"}, Err: tc.err}
			m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, fail)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			fail.Set(true)
			if err := m.Checkpoint(); !errors.Is(err, tc.err) {
				t.Fatalf("checkpoint with opens failing: %v, want %v", err, tc.err)
			}
			fail.Set(false)
			_, errCreate := m.Create(TopicPartition{"a", 0}, Config{})
			if got := len(m.OfflineDirs()) != 0; got != tc.offline {
				t.Fatalf("after %v: dir offline %v, want %v", tc.err, got, tc.offline)
			}
			if tc.offline {
				return
			}
			if errCreate != nil {
				t.Fatalf("create after %v: %v", tc.err, errCreate)
			}
			if err := m.Checkpoint(); err != nil {
				t.Fatalf("checkpoint once descriptors are back: %v", err)
			}
		})
	}
}

// TestLogDirLock: a Manager locks each log dir's .lock (Kafka's
// LogManager.lockLogDirs) until Close: a second Manager on the same dir,
// in another process or in this one, fails at once with an error naming
// the dir and the holder's process id, and opens once the holder is
// gone, however it went (Close, or the process killed).
func TestLogDirLock(t *testing.T) {
	if dir := os.Getenv("SAMSA_TEST_LOCK_HOLDER"); dir != "" {
		// The child: hold the dir until the parent kills us.
		m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		defer m.Close()
		fmt.Println("locked")
		select {}
	}
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(TopicPartition{"a", 0}, Config{}); err != nil {
		t.Fatal(err)
	}
	_, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	var held *vfs.LockedError
	if !errors.As(err, &held) || held.PID != os.Getpid() || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second manager in this process: %v, want the dir %s locked by process %d", err, dir, os.Getpid())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Another process.
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogDirLock$")
	cmd.Env = append(os.Environ(), "SAMSA_TEST_LOCK_HOLDER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	_, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	want := fmt.Sprintf("log dir %s is in use by process %d", dir, cmd.Process.Pid)
	if !errors.As(err, &held) || held.PID != cmd.Process.Pid || !strings.Contains(err.Error(), want) {
		t.Fatalf("manager beside another process: %v, want %q", err, want)
	}
	cmd.Process.Kill()
	cmd.Wait()
	m, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	defer m.Close()
	if m.Get(TopicPartition{"a", 0}) == nil {
		t.Fatal("log a-0 lost")
	}
}
