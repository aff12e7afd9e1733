// Package buildinfo is the version of the running samsa binary, read from
// the build information the Go toolchain embeds (runtime/debug.ReadBuildInfo):
// the main module's version, the VCS revision and whether the tree had
// uncommitted changes, and the Go version. The version string is made here
// only, for `samsa version`, the startup log line and metrics.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Info is the build of the running binary. Fields Go did not record are
// empty: Revision and Time when built outside a VCS checkout or with
// -buildvcs=false, Version "(devel)" for a build without a module version.
type Info struct {
	Version   string // main module version, e.g. v1.2.3 or v0.0.0-20261201150000-abcdef123456+dirty
	Revision  string // vcs.revision: the full commit hash
	Time      string // vcs.time: the commit time, RFC 3339
	Modified  bool   // vcs.modified: built from a tree with uncommitted changes
	GoVersion string // the Go toolchain, e.g. go1.26.0
}

var read = sync.OnceValue(func() Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if v := bi.Main.Version; v != "" {
		i.Version = v
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
})

// Read returns the running binary's build information; safe for concurrent
// use.
func Read() Info { return read() }

// Version is the one-line version of the running binary: the module
// version, then the first 12 digits of the commit and "modified" when the
// tree had uncommitted changes, then the Go version, e.g.
// "v0.0.0-20261201150000-abcdef123456 (commit abcdef123456, modified) go1.26.0".
func Version() string { return Read().String() }

// String formats i as Version does.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString(" (commit " + rev)
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.GoVersion)
	return b.String()
}
