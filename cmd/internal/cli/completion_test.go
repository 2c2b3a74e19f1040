package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runMainC(args ...string) (string, int) {
	var out, errb bytes.Buffer
	f := testFactory(&out, &errb)
	rc := f.Main(args)
	f.Out.Flush()
	return out.String() + errb.String(), rc
}

// complete asks for candidates the way the shell scripts do.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, rc := runMainC(append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, rc, out)
	var c []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") || strings.HasPrefix(l, "Completion ended") {
			continue
		}
		name, _, _ := strings.Cut(l, "\t") // without the description
		c = append(c, name)
	}
	return c
}

func TestCompletionScriptsLoad(t *testing.T) {
	for _, sh := range completionShells {
		out, rc := runMainC("completion", sh)
		require.Equal(t, 0, rc, out)
		require.Contains(t, out, "__complete", sh)
		p := filepath.Join(t.TempDir(), "sanlock."+sh)
		require.NoError(t, os.WriteFile(p, []byte(out), 0o644))
		bin, err := exec.LookPath(sh)
		if err != nil {
			if sh == "bash" {
				t.Fatal("bash is needed")
			}
			continue // zsh, fish: only generated here
		}
		var check *exec.Cmd
		switch sh {
		case "bash":
			check = exec.Command(bin, "-c", "source "+p+" && complete -p sanlock")
		case "zsh":
			check = exec.Command(bin, "-n", p)
		case "fish":
			check = exec.Command(bin, "--no-execute", p)
		}
		b, err := check.CombinedOutput()
		require.NoError(t, err, "%s: %s", sh, b)
		if sh == "bash" {
			require.Contains(t, string(b), "complete -o default -F __start_sanlock sanlock")
		}
	}
	out, rc := runMainC("completion")
	require.Equal(t, 1, rc)
	require.Contains(t, out, "completion bash|zsh|fish")
	out, rc = runMainC("completion", "csh")
	require.Equal(t, 1, rc)
	require.Contains(t, out, `unknown shell "csh"`)
}

func TestCompletionCandidates(t *testing.T) {
	root := complete(t, "")
	for _, w := range commandWords {
		require.Contains(t, root, w)
	}
	for a := range clientActions {
		require.Contains(t, root, a)
		require.Contains(t, complete(t, "client", ""), a)
	}
	for a := range directActions {
		require.Contains(t, complete(t, "direct", ""), a)
	}
	require.Equal(t, []string{"-p", "-r"}, complete(t, "client", "acquire", ""))
	require.Equal(t, []string{"-p", "-r"}, complete(t, "acquire", ""), "client is the default command")
	// -r may be given up to 8 times; other options once.
	require.Equal(t, []string{"-r"}, complete(t, "client", "acquire", "-r", "ls:r:/p:0", "-p", "1", ""))
	require.Equal(t, []string{"p", "s"}, complete(t, "client", "status", "-o", ""))
	require.Equal(t, []string{"512", "4096"}, complete(t, "direct", "init", "-Z", ""))
	require.Equal(t, []string{"1M", "2M", "4M", "8M"}, complete(t, "direct", "format", "-A", ""))
	require.Equal(t, []string{"0", "1"}, complete(t, "daemon", "-w", ""))
	d := complete(t, "daemon", "")
	for _, o := range []string{"-D", "-Q", "-R", "-H", "-L", "-S", "-U", "-G", "-t", "-g", "-o", "-w", "-h", "-l", "-b", "-e"} {
		require.Contains(t, d, o)
	}
	// A value with no listed choices completes as a file name.
	require.Empty(t, complete(t, "client", "add_lockspace", "-s", ""))
	require.Contains(t, complete(t, "completion", ""), "bash")
}
