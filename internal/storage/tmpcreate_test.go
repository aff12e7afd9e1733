package storage

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestTmpCloseSpeed(t *testing.T) {
	threads, _ := strconv.Atoi(os.Getenv("THREADS"))
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, RecoveryThreads: threads})
	if err != nil {
		t.Fatal(err)
	}
	b := pidBatch(t, 7, 0, 0, 1, false)
	for i := range 5000 {
		l, err := m.Create(TopicPartition{Topic: "t", Partition: int32(i)}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(append([]byte(nil), b...), 0); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	m.Close()
	t.Logf("threads %d close: %v", threads, time.Since(start))
	start = time.Now()
	m, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, RecoveryThreads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("threads %d open: %v", threads, time.Since(start))
	m.Close()
}
