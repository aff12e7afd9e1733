package samsa_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsahq/samsa"
)

// TestDirWithComma: Config.Dir and ClusterConfig.Dir are one directory
// each, even when the name holds a comma (t.TempDir of a subtest named
// "3 nodes, acks=all"). Split as log.dirs, the part after the comma was a
// relative log dir in the test's working directory, and its segments were
// once committed with the source.
func TestDirWithComma(t *testing.T) {
	ctx := context.Background()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(cwd, "stray-comma-dir")
	defer os.RemoveAll(stray)
	dir := filepath.Join(t.TempDir(), "node,stray-comma-dir")
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if _, err := os.Stat(filepath.Join(dir, "meta.properties")); err != nil {
		t.Errorf("Start: %v", err)
	}

	cdir := filepath.Join(t.TempDir(), "cluster,stray-comma-dir")
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 1, Dir: cdir})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := os.Stat(filepath.Join(cdir, "node-1", "meta.properties")); err != nil {
		t.Errorf("StartCluster: %v", err)
	}
	if _, err := os.Stat(stray); err == nil {
		t.Errorf("a log dir was created in the working directory: %s", stray)
	}
}
