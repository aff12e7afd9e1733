package storage

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestRecoveryErrorsNameTheFile: what recovery finds wrong names the file
// and the position in it (as etcd's WAL decoder does), not only the
// segment or an offset: a damaged index, a damaged time index, an
// unreadable producer snapshot.
func TestRecoveryErrorsNameTheFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string) (file string)
		want   string // besides the file
	}{
		{"index entry past the log", func(t *testing.T, dir string) string {
			f := segmentFiles(t, dir, indexSuffix)[0]
			modifyFile(t, f, func(b []byte) []byte {
				return EncodeOffsetIndex(b, []OffsetEntry{{RelativeOffset: 1 << 30, Position: 1 << 30}})
			})
			return f
		}, "at byte"},
		{"index of a size that is not whole entries", func(t *testing.T, dir string) string {
			f := segmentFiles(t, dir, indexSuffix)[0]
			modifyFile(t, f, func(b []byte) []byte { return append(b, 1, 2, 3) })
			return f
		}, "not a multiple"},
		{"empty time index", func(t *testing.T, dir string) string {
			f := segmentFiles(t, dir, timeIndexSuffix)[0]
			modifyFile(t, f, func([]byte) []byte { return nil })
			return f
		}, "is empty"},
		{"producer snapshot with a bad CRC", func(t *testing.T, dir string) string {
			offs, err := listSnapshots(vfs.Default, dir)
			if err != nil || len(offs) == 0 {
				t.Fatalf("snapshots %v: %v", offs, err)
			}
			f := snapshotPath(dir, offs[len(offs)-1])
			modifyFile(t, f, func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
			return f
		}, "crc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, _ := damagedLog(t)
			file := tc.damage(t, dir)
			var logs testutil.SyncBuffer
			l2, err := Open(OpenOptions{Dir: dir, Config: smallSegments, RecoveryPoint: -1,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") {
					line = l
					break
				}
			}
			if !strings.Contains(line, file) || !strings.Contains(line, tc.want) {
				t.Fatalf("warning %q does not name %s and %q; logs:\n%s", line, file, tc.want, logs.String())
			}
		})
	}
}
