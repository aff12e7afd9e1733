package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/proctest"
)

var (
	scaleSnapshotBytes    = flag.Int64("scale.snapshot-bytes", 0, "TestScale: the node's metadata.log.max.record.bytes.between.snapshots (0: the default, 20 MiB)")
	scaleCompareSnapshots = flag.Bool("scale.compare-snapshots", false, "TestScale: after the restart, restart without metadata snapshots (moved aside, writing them off by config), then with them again, and report the ratio")
)

// snapshotOverrides are the server overrides of scale.snapshot-bytes.
func snapshotOverrides() []string {
	if *scaleSnapshotBytes <= 0 {
		return nil
	}
	return []string{"metadata.log.max.record.bytes.between.snapshots=" + strconv.FormatInt(*scaleSnapshotBytes, 10)}
}

// compareSnapshotRestarts measures the restart of the node of dir without
// metadata snapshots against restarts with them (withFirst: the restart
// to serving just measured, which loaded one). It stops srv, moves the
// snapshots aside and restarts the node with snapshot writing turned off
// by config (metadata.log.max.record.bytes.between.snapshots at its
// maximum, metadata.log.max.snapshot.interval.ms=0), so that it replays
// the whole metadata log; then stops it, puts the snapshots back and
// restarts it as before, and stops it. It checks which restarts loaded a
// snapshot (the server's log) and reports both times, their ratio (the
// mean of the two restarts with snapshots over the one without) and the
// sizes of the metadata log and of the newest snapshot.
func compareSnapshotRestarts(t *testing.T, ctx context.Context, srv *proctest.Server, dir string, topics []string, withFirst time.Duration, put func(k, v string)) {
	t.Helper()
	mdir := filepath.Join(dir, "__cluster_metadata-0")
	aside := t.TempDir()
	if !strings.Contains(srv.Logs(), "loaded metadata snapshot") {
		t.Fatalf("the restart loaded no metadata snapshot: set -scale.snapshot-bytes below the metadata log's size")
	}
	stop := func(srv *proctest.Server) {
		t.Helper()
		if err := srv.Stop(2 * time.Minute); err != nil {
			t.Fatalf("clean shutdown: %v", err)
		}
	}
	stop(srv)
	snaps, _ := filepath.Glob(filepath.Join(mdir, "*.checkpoint")) // after the stop: it may write one
	if len(snaps) == 0 {
		t.Fatalf("no metadata snapshot in %s", mdir)
	}
	var logBytes, snapBytes int64
	segs, _ := filepath.Glob(filepath.Join(mdir, "*.log"))
	for _, p := range append(segs, snaps[len(snaps)-1]) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".log") {
			logBytes += fi.Size()
		} else {
			snapBytes = fi.Size()
		}
	}
	put("metadata_log_bytes", strconv.FormatInt(logBytes, 10))
	put("metadata_snapshot_bytes", strconv.FormatInt(snapBytes, 10))
	move := func(from, to string) {
		t.Helper()
		for _, p := range snaps {
			if err := os.Rename(filepath.Join(from, filepath.Base(p)), filepath.Join(to, filepath.Base(p))); err != nil {
				t.Fatal(err)
			}
		}
	}

	move(mdir, aside)
	off := []string{"metadata.log.max.record.bytes.between.snapshots=" + strconv.FormatInt(math.MaxInt64, 10), "metadata.log.max.snapshot.interval.ms=0"}
	srv, without := restartServing(t, ctx, dir, "restart-without-snapshots", topics, off...)
	if strings.Contains(srv.Logs(), "loaded metadata snapshot") {
		t.Fatal("the restart without snapshots loaded one")
	}
	put("restart_without_snapshots", without.Round(time.Millisecond).String())
	stop(srv)
	if left, _ := filepath.Glob(filepath.Join(mdir, "*.checkpoint")); len(left) > 0 {
		t.Fatalf("snapshots written with writing off: %v", left)
	}

	move(aside, mdir)
	srv, with := restartServing(t, ctx, dir, "restart-with-snapshots", topics, snapshotOverrides()...)
	if !strings.Contains(srv.Logs(), "loaded metadata snapshot") {
		t.Fatal("the restart with snapshots loaded none")
	}
	put("restart_with_snapshots", with.Round(time.Millisecond).String())
	put("snapshot_restart_ratio", fmt.Sprintf("%.2f", (withFirst+with).Seconds()/2/without.Seconds()))
	stop(srv)
}
