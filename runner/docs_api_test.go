package runner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docOf returns the doc comment of the type or func name declared in file.
func docOf(t *testing.T, file, name string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name == name && d.Doc != nil {
				return d.Doc.Text()
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == name && d.Doc != nil {
					return d.Doc.Text()
				}
			}
		}
	}
	t.Fatalf("%s: no doc comment on %s", file, name)
	return ""
}

// optionalInterfaces are the interfaces of package provider that a custom
// kind may implement beyond provider.Provider, read from its source so
// that a new one cannot be left out of the docs.
func optionalInterfaces(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var names []string
	files, err := filepath.Glob("../provider/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.IsExported() && ts.Name.Name != "Provider" {
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						names = append(names, ts.Name.Name)
					}
				}
			}
		}
	}
	if len(names) < 4 {
		t.Fatalf("found only %v optional interfaces in package provider", names)
	}
	return names
}

// Issue 31, point 7: `go doc ./runner ProviderFunc` and the README's
// Embedding section name every optional interface a custom kind may
// implement, and provider.Send for custom HTTP kinds.
func TestProviderFuncDocNamesEveryOptionalInterface(t *testing.T) {
	doc := docOf(t, "custom.go", "ProviderFunc")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, embed, ok := strings.Cut(string(readme), "### Embedding")
	if !ok {
		t.Fatal("README has no Embedding section")
	}
	embed, _, _ = strings.Cut(embed, "\n## ")
	for _, name := range optionalInterfaces(t) {
		if !strings.Contains(doc, "provider."+name) {
			t.Errorf("ProviderFunc's doc does not name provider.%s", name)
		}
		if name != "RequestContinuer" && !strings.Contains(embed, name) {
			t.Errorf("README's Embedding section does not name %s", name)
		}
	}
	for _, s := range []string{"provider.Send", "ResponseObserver"} {
		if !strings.Contains(doc, s) {
			t.Errorf("ProviderFunc's doc does not name %s", s)
		}
	}
	if !strings.Contains(embed, "provider.Send") {
		t.Error("README's Embedding section does not name provider.Send")
	}
}
