package testutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSleepsSayWhy: a test does not sleep to wait for a condition; it
// polls for it with a deadline (WaitFor) or, where timers drive the
// logic, runs in a testing/synctest bubble, where time.Sleep moves the
// bubble's fake clock once every goroutine is blocked: a scenario
// letting time pass, which this test allows. Any other time.Sleep in a
// _test.go file of the repository (outside a func literal given to
// synctest.Test or synctest.Run) must carry a comment on its line saying
// why it is part of the scenario (a pace, a helper only bubbles call).
func TestSleepsSayWhy(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		n++
		commented := map[int]bool{} // lines ending in a comment
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				commented[fset.Position(c.Pos()).Line] = true
			}
		}
		var stack []ast.Node
		ast.Inspect(f, func(node ast.Node) bool {
			if node == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, node)
			call, ok := node.(*ast.CallExpr)
			if !ok || !isCall(call, "time", "Sleep") {
				return true
			}
			for _, s := range stack {
				if c, ok := s.(*ast.CallExpr); ok && (isCall(c, "synctest", "Test") || isCall(c, "synctest", "Run")) {
					return true
				}
			}
			if pos := fset.Position(call.Pos()); !commented[pos.Line] {
				rel, _ := filepath.Rel(root, pos.Filename)
				t.Errorf("%s:%d: time.Sleep outside a synctest bubble without a comment saying why (poll with testutil.WaitFor, or use testing/synctest)", rel, pos.Line)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read %d test files under %s: the walk missed the repository", n, root)
	}
}

// isCall reports whether call is pkg.name(...).
func isCall(call *ast.CallExpr, pkg, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}
