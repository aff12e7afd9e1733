package errorfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

func create(t *testing.T, fsys vfs.FS, path string, data []byte, sync bool) vfs.File {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNth(t *testing.T) {
	dir := t.TempDir()
	inj := &Nth{Match: Match{Kinds: OpSync, PathContains: ".log"}, N: 2}
	fsys := Wrap(vfs.Default, inj)
	f := create(t, fsys, filepath.Join(dir, "a.index"), []byte("x"), true) // not matched
	defer f.Close()
	g := create(t, fsys, filepath.Join(dir, "a.log"), []byte("x"), true) // 1st
	defer g.Close()
	if inj.Fired() {
		t.Fatal("fired on the first matching sync")
	}
	err := g.Sync() // 2nd
	if !errors.Is(err, syscall.EIO) || !inj.Fired() {
		t.Fatalf("2nd sync: %v, want EIO", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("3rd sync: %v", err)
	}
}

func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	disk := NewDiskFull(10)
	fsys := Wrap(vfs.Default, disk)
	f := create(t, fsys, filepath.Join(dir, "f"), []byte("0123456"), false)
	defer f.Close()
	n, err := f.WriteAt([]byte("789abc"), 7)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the free space: %d, %v; want 3, ENOSPC", n, err)
	}
	if got := read(t, f.Name()); string(got) != "0123456789" {
		t.Fatalf("file %q", got)
	}
	if _, err := f.WriteAt([]byte("a"), 10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a full disk: %v", err)
	}
	disk.SetFree(100)
	if _, err := f.WriteAt([]byte("abc"), 10); err != nil {
		t.Fatalf("write once space returned: %v", err)
	}
	if disk.Refused() != 2 {
		t.Fatalf("refused %d, want 2", disk.Refused())
	}
}

func TestCrashKeepsSynced(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, bytes.Repeat([]byte("o"), 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewCrashFS(nil)
	// A durable file, overwritten in its middle and appended to.
	f, err := c.OpenFile(old, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("XXXX"), 5000)
	f.WriteAt([]byte("tail"), 10000)
	// A new file, synced, in a synced directory: all of it stays.
	synced := create(t, c, filepath.Join(dir, "synced"), []byte("durable"), true)
	synced.WriteAt([]byte("+lost"), 7)
	if err := vfs.SyncPath(c, dir); err != nil {
		t.Fatal(err)
	}
	synced.WriteAt([]byte("+lost again"), 12)
	// A new file synced but whose directory is not: its name is lost.
	create(t, c, filepath.Join(dir, "noname"), []byte("data"), true)
	// A checkpoint replaced atomically: old or new, never neither.
	if err := os.WriteFile(filepath.Join(dir, "ck"), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := create(t, c, filepath.Join(dir, "ck.tmp"), []byte("v2"), true)
	tmp.Close()
	if err := c.Rename(filepath.Join(dir, "ck.tmp"), filepath.Join(dir, "ck")); err != nil {
		t.Fatal(err)
	}
	if err := c.Crash(CrashOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("after"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after the crash: %v", err)
	}
	if _, err := c.OpenFile(old, os.O_RDONLY, 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("open after the crash: %v", err)
	}
	if got := read(t, old); !bytes.Equal(got, bytes.Repeat([]byte("o"), 10000)) {
		t.Fatalf("old file: %d bytes, changed: unsynced writes survived", len(got))
	}
	if got := read(t, filepath.Join(dir, "synced")); string(got) != "durable" {
		t.Fatalf("synced file %q, want the synced contents", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "noname")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file in an unsynced directory: %v, want gone", err)
	}
	if got := read(t, filepath.Join(dir, "ck")); string(got) != "v2" {
		t.Fatalf("checkpoint %q", got)
	}
}

// TestCrashRandom: with a Rand, what survives of a file lies between its
// synced contents and its contents at the crash, page by page, and the
// synced prefix is always whole.
func TestCrashRandom(t *testing.T) {
	for seed := range uint64(20) {
		dir := t.TempDir()
		c := NewCrashFS(nil)
		synced := bytes.Repeat([]byte("s"), 3*pageSize+100)
		f := create(t, c, filepath.Join(dir, "f"), synced, true)
		if err := vfs.SyncPath(c, dir); err != nil {
			t.Fatal(err)
		}
		more := bytes.Repeat([]byte("n"), 5*pageSize)
		f.WriteAt(more, int64(len(synced)))
		if err := c.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0))}); err != nil {
			t.Fatal(err)
		}
		got := read(t, filepath.Join(dir, "f"))
		if len(got) < len(synced) || len(got) > len(synced)+len(more) {
			t.Fatalf("seed %d: %d bytes, want [%d, %d]", seed, len(got), len(synced), len(synced)+len(more))
		}
		if !bytes.Equal(got[:len(synced)], synced) {
			t.Fatalf("seed %d: synced prefix changed", seed)
		}
		for i, b := range got[len(synced):] {
			if b != 'n' && b != 0 {
				t.Fatalf("seed %d: byte %d is %q, want written or zero", seed, len(synced)+i, b)
			}
		}
	}
}
