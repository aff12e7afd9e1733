package storage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestFilesGoThroughFS: the package's own files (not its tests) reach the
// disk only through the vfs.FS of their log or Manager, so that the
// faults of vfs/errorfs reach every open, write, sync, rename and
// removal: no call of package os or unix that touches a file, except
// reading the machine's memory size from /proc and /sys.
func TestFilesGoThroughFS(t *testing.T) {
	banned := map[string]bool{
		"Open": true, "OpenFile": true, "Create": true, "CreateTemp": true, "Rename": true, "Remove": true,
		"RemoveAll": true, "Truncate": true, "Mkdir": true, "MkdirAll": true, "MkdirTemp": true, "ReadDir": true,
		"ReadFile": true, "WriteFile": true, "Stat": true, "Lstat": true, "Chtimes": true, "Link": true, "Symlink": true,
		"Syncfs": true, "Fsync": true, "Fdatasync": true, "Mmap": true,
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || (pkg.Name != "os" && pkg.Name != "unix" && pkg.Name != "syscall") || !banned[sel.Sel.Name] {
				return true
			}
			if len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && (strings.HasPrefix(lit.Value, `"/proc/`) || strings.HasPrefix(lit.Value, `"/sys/`)) {
					return true
				}
			}
			t.Errorf("%s: %s.%s bypasses the log's vfs.FS", fset.Position(call.Pos()), pkg.Name, sel.Sel.Name)
			return true
		})
	}
}
