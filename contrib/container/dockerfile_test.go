// Package container holds the container recipe (Dockerfile, entry point)
// of docs/container.md. There is no container engine where the tests run,
// so this test checks the Dockerfile's syntax and its references instead.
package container

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const root = "../.."

var instructions = map[string]bool{
	"FROM": true, "RUN": true, "COPY": true, "ADD": true, "ENV": true, "ARG": true,
	"WORKDIR": true, "VOLUME": true, "ENTRYPOINT": true, "CMD": true, "LABEL": true,
	"USER": true, "EXPOSE": true, "HEALTHCHECK": true, "STOPSIGNAL": true, "SHELL": true,
	"ONBUILD": true,
}

// logicalLines joins continuation lines and drops comments and blanks.
func logicalLines(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		out = append(out, cur+trimmed)
		cur = ""
	}
	require.Empty(t, cur, "the last line ends in a continuation")
	return out
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	lines := logicalLines(t, string(b))
	require.NotEmpty(t, lines)
	require.True(t, strings.HasPrefix(lines[0], "FROM "), "first instruction: %s", lines[0])

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	require.NotNil(t, goVer)

	stages := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		ins := strings.ToUpper(f[0])
		require.True(t, instructions[ins], "unknown instruction %q", l)
		require.Equal(t, ins, f[0], "instructions in upper case: %q", l)
		switch ins {
		case "FROM":
			if strings.HasPrefix(f[1], "golang:") {
				require.True(t, strings.HasPrefix(f[1], "golang:"+string(goVer[1])),
					"the build image's Go (%s) must match go.mod (%s)", f[1], goVer[1])
			}
			if len(f) == 4 {
				require.Equal(t, "AS", strings.ToUpper(f[2]), l)
				stages[f[3]] = true
			} else {
				require.Len(t, f, 2, l)
			}
		case "COPY":
			args := f[1:]
			from := ""
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				if v, ok := strings.CutPrefix(args[0], "--from="); ok {
					from = v
				}
				args = args[1:]
			}
			require.GreaterOrEqual(t, len(args), 2, l)
			if from != "" {
				require.True(t, stages[from], "COPY --from=%s: no such stage before it", from)
				continue
			}
			// Sources are relative to the build context, the repository root.
			for _, src := range args[:len(args)-1] {
				if src == "." {
					continue
				}
				_, err := os.Stat(filepath.Join(root, src))
				require.NoError(t, err, "COPY source %s", src)
			}
		case "ENTRYPOINT", "CMD", "VOLUME":
			var v []string
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(l, f[0]))), &v), l)
		case "RUN":
			for _, m := range regexp.MustCompile(`go build .*? (\./cmd/[a-z-]+)`).FindAllStringSubmatch(l, -1) {
				_, err := os.Stat(filepath.Join(root, m[1], "main.go"))
				require.NoError(t, err, "built package %s", m[1])
			}
		}
	}
	require.Len(t, stages, 1, "one build stage")
}

func TestEntrypointSyntax(t *testing.T) {
	out, err := exec.Command("bash", "-n", "entrypoint.sh").CombinedOutput()
	require.NoError(t, err, "%s", out)
	fi, err := os.Stat("entrypoint.sh")
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111, "entrypoint.sh must be executable")
}
