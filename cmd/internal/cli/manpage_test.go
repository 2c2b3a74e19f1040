package cli

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
)

// The man page (docs/man/sanlock.8) is written by hand; these tests keep
// it from drifting from the code: every command, action, option, config
// key and environment variable the code knows is described, and the page
// names nothing the code does not know.

const repoRoot = "../../.."

func manPage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/man/sanlock.8"))
	require.NoError(t, err)
	return string(b)
}

// manSection returns the text of ".SH name" up to the next ".SH".
func manSection(t *testing.T, page, name string) string {
	t.Helper()
	start := strings.Index(page, "\n.SH "+name+"\n")
	require.GreaterOrEqual(t, start, 0, "section %s", name)
	rest := page[start+1:]
	if end := strings.Index(rest[1:], "\n.SH "); end >= 0 {
		return rest[:end+1]
	}
	return rest
}

func setOf(ms [][]string, group int) []string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m[group]) {
			out = append(out, m[group])
		}
	}
	slices.Sort(out)
	return out
}

func TestManPageActions(t *testing.T) {
	page := manPage(t)
	re := regexp.MustCompile(`sanlock (client|direct) ([a-z_]+)`)
	var client, direct [][]string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		if m[1] == "client" {
			client = append(client, m)
		} else {
			direct = append(direct, m)
		}
	}
	require.Equal(t, sortedKeys(clientActions), setOf(client, 2), "client actions in sanlock.8")
	require.Equal(t, sortedKeys(directActions), setOf(direct, 2), "direct actions in sanlock.8")

	cmds := manSection(t, page, "COMMANDS")
	got := setOf(regexp.MustCompile(`(?m)^\.TP\n\.B ([a-z]+)$`).FindAllStringSubmatch(cmds, -1), 1)
	want := slices.Clone(commandWords)
	slices.Sort(want)
	require.Equal(t, want, got, "commands in sanlock.8")
}

// acceptedOptions are the letters the option scanner knows in client or
// daemon mode (some, like -X, are daemon options only).
func acceptedOptions() []string {
	var out []string
	for c := byte('A'); c <= 'z'; c++ {
		if c > 'Z' && c < 'a' {
			continue
		}
		known := false
		for _, m := range [][2]string{{"client", "status"}, {"daemon", ""}} {
			err := scanOptions(defaultOptions(), m[0], m[1], []string{"-" + string(c), "1"}, io.Discard)
			var ue *usageError
			if !(errors.As(err, &ue) && len(ue.lines) == 1 && strings.HasPrefix(ue.lines[0], "unknown option: ")) {
				known = true
			}
		}
		if known {
			out = append(out, string(c))
		}
	}
	slices.Sort(out)
	return out
}

func TestManPageOptions(t *testing.T) {
	opts := manSection(t, manPage(t), "OPTIONS")
	got := setOf(regexp.MustCompile(`(?m)^\.BI? \\-([A-Za-z])\b`).FindAllStringSubmatch(opts, -1), 1)
	slices.Sort(got)
	require.Equal(t, acceptedOptions(), got, "options in sanlock.8")
}

// configKeys reads the keys ApplyConfigKey knows from the daemon package's
// source: the string constants of its case clauses.
func configKeys(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join(repoRoot, "daemon", "config")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var keys []string
	found := false
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != "ApplyConfigKey" {
				continue
			}
			found = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				sw, ok := n.(*ast.SwitchStmt)
				if !ok || sw.Tag == nil {
					return true
				}
				if id, ok := sw.Tag.(*ast.Ident); !ok || id.Name != "key" {
					return true
				}
				for _, st := range sw.Body.List {
					for _, x := range st.(*ast.CaseClause).List {
						if bl, ok := x.(*ast.BasicLit); ok && bl.Kind == token.STRING {
							k, _ := strconv.Unquote(bl.Value)
							keys = append(keys, k)
						}
					}
				}
				return false
			})
		}
	}
	require.True(t, found, "config.Config.ApplyConfigKey not found")
	require.NotEmpty(t, keys)
	slices.Sort(keys)
	return keys
}

func TestManPageConfigKeys(t *testing.T) {
	keys := configKeys(t)
	for _, k := range keys {
		require.True(t, config.DefaultConfig().ApplyConfigKey(k, "1"), k)
	}
	sec := manSection(t, manPage(t), "CONFIGURATION FILE")
	got := setOf(regexp.MustCompile(`(?m)^\.TP\n\.B ([a-z_]+)$`).FindAllStringSubmatch(sec, -1), 1)
	require.Equal(t, keys, got, "config keys in sanlock.8")

	// The default sanlock.conf that make install puts in /etc shows every
	// key, commented out.
	b, err := os.ReadFile(filepath.Join(repoRoot, "contrib/sanlock.conf"))
	require.NoError(t, err)
	conf := setOf(regexp.MustCompile(`(?m)^#([a-z_]+) =`).FindAllStringSubmatch(string(b), -1), 1)
	require.Equal(t, keys, conf, "keys in contrib/sanlock.conf")
}

func TestManPageEnvironment(t *testing.T) {
	sec := manSection(t, manPage(t), "ENVIRONMENT")
	for _, v := range []string{config.EnvRunDir, config.EnvPrivileged, config.EnvWdmdSocket, config.EnvLogFile,
		EnvConfigFile, sdnotify.EnvSocket, sdnotify.EnvWatchdogUSec, sdnotify.EnvWatchdogPid} {
		require.Contains(t, sec, `.B `+v, v)
	}
	require.Contains(t, manPage(t), "\n.SH EXIT STATUS\n")
}

// TestManPagesRender: man -l formats both pages without a warning.
func TestManPagesRender(t *testing.T) {
	man, err := exec.LookPath("man")
	require.NoError(t, err, "man (man-db) is needed")
	for _, p := range []string{"sanlock.8", "wdmd.8"} {
		cmd := exec.Command(man, "--warnings", "-l", filepath.Join(repoRoot, "docs/man", p))
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		require.Empty(t, stderr.String(), p)
		require.Contains(t, string(out), strings.ToUpper(strings.TrimSuffix(p, ".8"))+"(8)")
		require.Contains(t, string(out), "EXIT STATUS")
	}
}
