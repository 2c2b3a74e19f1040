package sim

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestManagerUsesHooks keeps the manager runnable by the simulator: every
// goroutine it starts must go through cfg.spawn (manager.Setup.Go) and every
// wait for another goroutine's channel through cfg.await (Setup.Await). A bare
// go statement or receive would run outside the scheduler: a hang or a run
// that no longer replays. The receives listed here are allowed: they wait
// for a context, or are on paths the simulator does not take (synchronous
// add and remove, shutdown, a concurrent first open of a disk, which never
// waits in the simulator since its opens return at once).
func TestManagerUsesHooks(t *testing.T) {
	allowedRecv := map[string]bool{
		"ctx.Done()": true, "sp.addDone": true, "sp.gone": true, "d.ready": true,
	}
	// killpath.go reaps a kill program (the simulator injects RunKillpath);
	// adopt.go, when present, adopts lockspaces at a live re-exec, a path
	// the simulator does not take.
	allowedFile := map[string]bool{"killpath.go": true, "adopt.go": true}
	files, err := filepath.Glob("../../manager/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	var bad []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		base := filepath.Base(f)
		if allowedFile[base] {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				// the hooks themselves: go fn() and <-ch when unset
				return !(base == "manager.go" && (x.Name.Name == "spawn" || x.Name.Name == "await"))
			case *ast.GoStmt:
				bad = append(bad, fset.Position(x.Pos()).String()+": go statement (use cfg.spawn)")
			case *ast.UnaryExpr:
				if x.Op == token.ARROW {
					var sb strings.Builder
					_ = printer.Fprint(&sb, fset, x.X)
					if !allowedRecv[sb.String()] {
						bad = append(bad, fset.Position(x.Pos()).String()+": receive from "+sb.String()+" (use cfg.await)")
					}
				}
			}
			return true
		})
	}
	require.Empty(t, bad, "the simulator drives the manager's goroutines and waits through manager.Setup.Go and Setup.Await")
}
