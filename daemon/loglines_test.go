package daemon

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogFormatsNoVerbV: no log format string of the daemon, the manager or of the delta
// package (whose lines the daemon logs) uses %v, which prints "<nil>" for a
// nil error and Go syntax for structs, slices and booleans; and no literal
// log message (the usual form: message and zap fields) holds a verb.
func TestLogFormatsNoVerbV(t *testing.T) {
	logCalls := map[string]bool{"logf": true, "Logf": true, "deltaLogf": true}
	logMethods := map[string]bool{"Error": true, "Warn": true, "Info": true, "Debug": true}
	var files []string
	for _, pat := range []string{"*.go", "../manager/*.go", "../delta/*.go"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	fset := gotoken.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		checkFormat := func(call *ast.CallExpr) {
			if len(call.Args) == 0 {
				return
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != gotoken.STRING {
				return
			}
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			checked++
			if strings.Contains(s, "%v") || strings.Contains(s, "%+v") || strings.Contains(s, "%#v") {
				t.Errorf("%s: log format %q uses %%v", fset.Position(lit.Pos()), s)
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := ""
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if logCalls[name] {
				checkFormat(call)
			}
			if logMethods[name] && len(call.Args) > 0 {
				// A message given as a literal is no format: a verb in it
				// would be printed as is.
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
					checked++
					if strings.Contains(lit.Value, "%") {
						t.Errorf("%s: log message %s has a format verb but no Sprintf", fset.Position(lit.Pos()), lit.Value)
					}
				}
				if inner, ok := call.Args[0].(*ast.CallExpr); ok {
					if sel, ok := inner.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" {
						checkFormat(inner)
					}
				}
			}
			return true
		})
	}
	assert.Greater(t, checked, 50, "log format strings found")
}
