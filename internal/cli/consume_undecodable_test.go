package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/record/recordtest"
)

// TestConsumeStopsAtUndecodableBatch: a log written before the broker
// checked records may hold batches no client can decode. consume
// --until-end prints what comes before and stops with an error naming the
// offset, instead of retrying forever: at once for a batch franz-go
// reports (garbage lz4), after the stall bound for one it silently
// refetches (fewer records than the header claims).
func TestConsumeStopsAtUndecodableBatch(t *testing.T) {
	defer func(d time.Duration) { consumeStallTimeout = d }(consumeStallTimeout)
	consumeStallTimeout = 3 * time.Second
	garbage := recordtest.Plain(2, time.Now().UnixMilli())
	garbage.Codec = record.CodecLZ4
	short := recordtest.Plain(3, time.Now().UnixMilli())
	for _, tc := range []struct {
		name  string
		batch []byte
		want  string
	}{
		{"garbage lz4", recordtest.RawCompressed(garbage, []byte("not an lz4 frame at all, just text")), "partition 0 at offset 3"},
		{"three records claimed and two present", recordtest.Raw(short, append(recordtest.Good(0), recordtest.Good(1)...)), "partition 0 at offset 5 (end 6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n, err := samsa.Start(ctx, samsa.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			addr := n.Addr()
			mustRun(t, nil, "topic", "create", "old", "--brokers", addr)
			mustRun(t, strings.NewReader("a\nb\nc\n"), "produce", "old", "--brokers", addr)
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			// The batch as an older broker stored it: offsets stamped,
			// CRC right, records wrong; recovery checks the framing and
			// the CRC and keeps it.
			b := tc.batch
			record.SetBaseOffset(b, 3)
			seg := filepath.Join(dir, "old-0", "00000000000000000000.log")
			f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
			f.Close()
			os.Remove(filepath.Join(dir, ".kafka_cleanshutdown"))
			n, err = samsa.Start(ctx, samsa.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			addr = n.Addr()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			r := run(t, nil, "consume", "old", "--brokers", addr, "--from-beginning", "--until-end", "--quiet")
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("consume: err %v, want %q\nstderr: %s", r.err, tc.want, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "a\nb\nc\n") {
				t.Fatalf("consume printed %q before the batch", r.stdout)
			}
		})
	}
}
