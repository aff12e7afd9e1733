package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/storage"
)

func TestStorageRandomUUID(t *testing.T) {
	a := strings.TrimSpace(mustRun(t, nil, "storage", "random-uuid").stdout)
	b := strings.TrimSpace(mustRun(t, nil, "storage", "random-uuid").stdout)
	if len(a) != 22 || len(b) != 22 || a == b || strings.HasPrefix(a, "-") {
		t.Fatalf("random-uuid gave %q and %q", a, b)
	}
}

func TestStorageFormat(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	props := filepath.Join(dir, "server.properties")
	conf := "process.roles=broker\nnode.id=4\nlisteners=PLAINTEXT://127.0.0.1:0\ncontroller.quorum.voters=1@127.0.0.1:1\nlog.dirs=" + d1 + "," + d2 + "\n"
	if err := os.WriteFile(props, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, nil, "storage", "format", "--config", props); r.err == nil || !strings.Contains(r.err.Error(), "--cluster-id is required") {
		t.Fatalf("format without a cluster id: %v", r.err)
	}
	r := mustRun(t, nil, "storage", "format", "--cluster-id", "c1", "--config", props)
	if strings.Count(r.stdout, "Formatted") != 2 {
		t.Fatalf("format output %q", r.stdout)
	}
	for _, d := range []string{d1, d2} {
		m, err := storage.ReadMetaProperties(filepath.Join(d, storage.MetaPropertiesFile))
		if err != nil {
			t.Fatal(err)
		}
		if m.ClusterID != "c1" || m.NodeID != 4 || m.Version != 1 || len(m.DirectoryID) != 22 {
			t.Fatalf("%s: %+v", d, m)
		}
	}
	if r := run(t, nil, "storage", "format", "-t", "c1", "-c", props); r.err == nil || !strings.Contains(r.err.Error(), "already formatted") {
		t.Fatalf("second format: %v", r.err)
	}
	if err := os.Remove(filepath.Join(d2, storage.MetaPropertiesFile)); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, nil, "storage", "format", "-t", "c1", "-c", props, "--ignore-formatted")
	if !strings.Contains(r.stdout, d1+" is already formatted") || !strings.Contains(r.stdout, "Formatted "+d2) {
		t.Fatalf("format --ignore-formatted output %q", r.stdout)
	}
	if r := run(t, nil, "storage", "format", "-t", "c2", "-c", props, "-g"); r.err == nil || !strings.Contains(r.err.Error(), "formatted for cluster c1") {
		t.Fatalf("format for another cluster: %v", r.err)
	}
	if r := run(t, nil, "storage", "format", "-t", "c2", "-c", props, "--override", "cluster.id=c3"); r.err == nil || !strings.Contains(r.err.Error(), "differs") {
		t.Fatalf("format against cluster.id: %v", r.err)
	}
	if r := run(t, nil, "storage", "format", "-t", "bad id", "-c", props); r.err == nil {
		t.Fatal("format accepted a cluster id with a blank")
	}
	r = mustRun(t, nil, "storage", "info", "-c", props)
	if strings.Count(r.stdout, "cluster.id=c1 node.id=4") != 2 {
		t.Fatalf("info output %q", r.stdout)
	}
}

// TestStorageFormatThenStart: a node started on formatted dirs takes their
// cluster id; a node of a multi-node cluster refuses dirs that are not
// formatted.
func TestStorageFormatThenStart(t *testing.T) {
	dir := t.TempDir()
	id := strings.TrimSpace(mustRun(t, nil, "storage", "random-uuid").stdout)
	mustRun(t, nil, "storage", "format", "-t", id, "--override", "log.dirs="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.ClusterID(); got != id {
		t.Errorf("cluster id %q, want the formatted %q", got, id)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), Properties: map[string]string{"controller.quorum.voters": "1@127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "not formatted") {
		t.Fatalf("unformatted quorum node: %v", err)
	}
}

// TestStorageFormatEnvironment: storage format reads the node's
// configuration as samsa server does, SAMSA_* variables included, so it
// formats the log dirs the server will open.
func TestStorageFormatEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "env-dir")
	t.Setenv("SAMSA_LOG_DIRS", dir)
	t.Setenv("SAMSA_NODE_ID", "7")
	mustRun(t, nil, "storage", "format", "--cluster-id", "envcluster")
	m, err := storage.ReadMetaProperties(filepath.Join(dir, storage.MetaPropertiesFile))
	if err != nil {
		t.Fatalf("the dir SAMSA_LOG_DIRS names: %v", err)
	}
	if m.ClusterID != "envcluster" || m.NodeID != 7 {
		t.Fatalf("meta.properties %+v, want cluster envcluster, node 7", m)
	}
	// --override still wins over the environment.
	other := filepath.Join(t.TempDir(), "override-dir")
	mustRun(t, nil, "storage", "format", "--cluster-id", "envcluster", "--override", "log.dirs="+other)
	if _, err := os.Stat(filepath.Join(other, storage.MetaPropertiesFile)); err != nil {
		t.Fatalf("--override log.dirs: %v", err)
	}
}

// TestStorageFormatFeature: --feature transaction.version=N is written to
// bootstrap.json as a FeatureLevelRecord; unknown features, levels out of
// range and repeats are refused.
func TestStorageFormatFeature(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--feature", "transaction.version=3"}, "not in [0, 2]"},
		{[]string{"--feature", "metadata.version=20"}, "unknown feature"},
		{[]string{"--feature", "transaction.version"}, "name=level"},
		{[]string{"-f", "transaction.version=1", "-f", "transaction.version=2"}, "more than once"},
	} {
		dir := t.TempDir()
		r := run(t, nil, append([]string{"storage", "format", "-t", "c1", "--override", "log.dirs=" + dir}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.err) {
			t.Fatalf("%v: %v, want %q", tc.args, r.err, tc.err)
		}
	}
	dir := t.TempDir()
	mustRun(t, nil, "storage", "format", "-t", "c1", "--override", "log.dirs="+dir, "-f", "transaction.version=1")
	recs, err := metadata.ReadBootstrap([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []metadata.Record{metadata.FeatureLevelRecord{Name: "transaction.version", FeatureLevel: 1}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("bootstrap records %#v, want %#v", recs, want)
	}
}
