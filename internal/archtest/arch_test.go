package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/gosanlock/gosanlock"

// repoRoot is the module's directory, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found above the test: %v", err)
	}
	return dir
}

// goTool finds the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleImports lists each package of the module with the module's
// packages it imports (non-test files; every build tag the module uses is
// given so that tagged files count too).
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-tags", buildTags,
		"-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		name := rel(f[0])
		var deps []string
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				deps = append(deps, rel(imp))
			}
		}
		pkgs[name] = deps
	}
	return pkgs
}

// buildTags are the tags under which some files of the module build; the
// import graph is the union over all of them.
const buildTags = "simbugs,wdmd_testdev"

func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// A rule is one row of the package table: the packages it covers and
// the module packages they may import.
type rule struct {
	line    int
	covers  []string // patterns: "pkg" or "pkg/..."
	imports []string // patterns
}

// readRules reads the table under "## What each package owns": rows of
// the form | `pkg`, `pkg2/...` | what it owns | `dep`, `dep2/...` |, with
// "none" in the last cell for a package that imports none of the module.
func readRules(t *testing.T, doc string) []rule {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## What each package owns"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Errorf("%s:%d: a package row needs three cells (package, owns, may import)", doc, n)
			continue
		}
		r := rule{line: n, covers: backticked(cells[0]), imports: backticked(cells[len(cells)-1])}
		if len(r.imports) == 0 && strings.TrimSpace(cells[len(cells)-1]) != "none" {
			t.Errorf("%s:%d: the last cell must list the packages it may import, or say none", doc, n)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no package table under \"## What each package owns\"", doc)
	}
	return rules
}

// backticked returns the `quoted` words of a cell.
func backticked(cell string) []string {
	var out []string
	parts := strings.Split(cell, "`")
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// match reports whether pattern covers pkg, and how specifically (the
// length of the pattern's fixed part; -1: no match).
func match(pattern, pkg string) int {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		if pkg == base || strings.HasPrefix(pkg, base+"/") {
			return len(base)
		}
		return -1
	}
	if pattern == pkg {
		return len(pattern) + 1 // an exact row beats a /... row of the same path
	}
	return -1
}

// ruleFor is the most specific rule that covers pkg.
func ruleFor(rules []rule, pkg string) (rule, bool) {
	best, bestLen := rule{}, -1
	for _, r := range rules {
		for _, c := range r.covers {
			if l := match(c, pkg); l > bestLen {
				best, bestLen = r, l
			}
		}
	}
	return best, bestLen >= 0
}

func allowed(r rule, dep string) bool {
	for _, p := range r.imports {
		if match(p, dep) >= 0 {
			return true
		}
	}
	return false
}

// TestImportsMatchArchitecture checks every package of the module against
// the table of docs/architecture.md: each is covered by a row, imports only
// what its row allows, and each row names packages that exist.
func TestImportsMatchArchitecture(t *testing.T) {
	root := repoRoot(t)
	doc := filepath.Join(root, "docs", "architecture.md")
	rules := readRules(t, doc)
	pkgs := moduleImports(t, root)

	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		r, ok := ruleFor(rules, p)
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md \"What each package owns\"", p)
			continue
		}
		for _, dep := range pkgs[p] {
			if !allowed(r, dep) {
				t.Errorf("%s imports %s, which its row (docs/architecture.md:%d) does not allow", p, dep, r.line)
			}
		}
	}
	for _, r := range rules {
		for _, pats := range [][]string{r.covers, r.imports} {
			for _, c := range pats {
				if !coversAny(c, names) {
					t.Errorf("docs/architecture.md:%d names %s, which is no package of the module", r.line, c)
				}
			}
		}
	}
}

func coversAny(pattern string, pkgs []string) bool {
	for _, p := range pkgs {
		if match(pattern, p) >= 0 {
			return true
		}
	}
	return false
}

// TestMatch pins the pattern rules the table is read with.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		ok           bool
	}{
		{"wire", "wire", true},
		{"wire", "wire/x", false},
		{"wdmd/...", "wdmd", true},
		{"wdmd/...", "wdmd/server", true},
		{"wdmd/...", "wdmdx", false},
	} {
		if got := match(c.pattern, c.pkg) >= 0; got != c.ok {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.ok)
		}
	}
	r := []rule{{covers: []string{"wdmd/..."}}, {covers: []string{"wdmd/server"}, line: 2}}
	if got, _ := ruleFor(r, "wdmd/server"); got.line != 2 {
		t.Errorf("the exact row must win over a /... row")
	}
}
