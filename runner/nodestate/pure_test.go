package nodestate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The machine stays pure, as the Temporal workflow's replays need: it imports
// no clock, randomness, I/O or synchronisation, starts no goroutines, uses no
// channels, and never ranges over a map (whose order Go randomises).
func TestPure(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"fmt": true, "slices": true,
		"github.com/noderun/noderun/journal": true, "github.com/noderun/noderun/runner/graph": true}
	files := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); !allowed[p] {
				t.Errorf("%s: imports %s", fset.Position(imp.Pos()), p)
			}
		}
		maps := map[string]bool{} // fields and parameters declared as maps (the machine has one: its id index)
		ast.Inspect(f, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok {
				if _, isMap := fl.Type.(*ast.MapType); isMap {
					for _, name := range fl.Names {
						maps[name.Name] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt, *ast.SelectStmt, *ast.SendStmt, *ast.ChanType:
				t.Errorf("%s: goroutines or channels", fset.Position(n.Pos()))
			case *ast.RangeStmt:
				var name string
				switch x := n.X.(type) {
				case *ast.Ident:
					name = x.Name
				case *ast.SelectorExpr:
					name = x.Sel.Name
				}
				if maps[name] {
					t.Errorf("%s: ranges over map %s", fset.Position(n.Pos()), name)
				}
			}
			return true
		})
	}
	if files == 0 {
		t.Fatal("no source files parsed")
	}
}
