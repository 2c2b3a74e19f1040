package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil/inproc"
)

func runMainC(args ...string) (string, int) { return runMainCF(nil, args...) }

// runMainCF is runMainC with the test factory changed by set (if not nil).
func runMainCF(set func(*Factory), args ...string) (string, int) {
	var out, errb bytes.Buffer
	f := testFactory(&out, &errb)
	if set != nil {
		set(f)
	}
	rc := f.Main(args)
	f.Out.Flush()
	return out.String() + errb.String(), rc
}

// complete asks for candidates the way the shell scripts do.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	c, _ := completeD(t, nil, args...)
	return c
}

// completeD is complete with the factory changed by set, and the
// directive (the ":N" line) too.
func completeD(t *testing.T, set func(*Factory), args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	out, rc := runMainCF(set, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, rc, out)
	var c []string
	d := cobra.ShellCompDirective(-1)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if n, ok := strings.CutPrefix(l, ":"); ok {
			v, err := strconv.Atoi(n)
			require.NoError(t, err, out)
			d = cobra.ShellCompDirective(v)
			continue
		}
		if strings.HasPrefix(l, "Completion ended") {
			continue
		}
		name, _, _ := strings.Cut(l, "\t") // without the description
		c = append(c, name)
	}
	require.NotEqual(t, cobra.ShellCompDirective(-1), d, out)
	return c, d
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
	require.Equal(t, []string{"--wait", "-p", "-r"}, complete(t, "client", "acquire", ""))
	require.Equal(t, []string{"--wait", "-p", "-r"}, complete(t, "acquire", ""), "client is the default command")
	// -r may be given up to 8 times; other options once.
	require.Equal(t, []string{"--wait", "-r"}, complete(t, "client", "acquire", "-r", "ls:r:/p:0", "-p", "1", ""))
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

// TestCompletionActionsAndFiles: every client action at the top level
// (locks included) and under client, the long options of the actions that
// take them, file names where the tool takes a path or a program.
func TestCompletionActionsAndFiles(t *testing.T) {
	for a := range clientActions {
		if slices.Contains(commandWords, a) {
			continue // "sanlock version" is the command, not the action
		}
		require.Contains(t, complete(t, a[:1]), a, "sanlock %s<TAB>", a[:1])
	}
	require.ElementsMatch(t, []string{"locks", "log_dump", "lookup"}, complete(t, "lo"), "filtered by what is typed")
	require.Equal(t, []string{"--json", "-r", "-s"}, complete(t, "locks", ""))
	require.Equal(t, []string{"--json", "-r", "-s"}, complete(t, "client", "locks", ""))
	require.Equal(t, []string{"--json"}, complete(t, "client", "status", "--"))
	require.Equal(t, []string{"-D", "-o"}, complete(t, "status", "--json", ""), "--json once")
	for a := range clientActions {
		c := complete(t, "client", a, "")
		require.Equal(t, jsonActions[a], slices.Contains(c, "--json"), "client %s: %v", a, c)
	}
	require.Equal(t, []string{"--wait", "-p", "-r"}, complete(t, "acquire", ""))
	c, d := completeD(t, nil, "acquire", "--wait", "")
	require.Empty(t, c)
	require.Equal(t, cobra.ShellCompDirectiveNoFileComp, d, "--wait takes a duration")

	files := [][]string{
		{"direct", "dump", ""},
		{"direct", "next_free", "/de"},
		{"client", "command", "-r", "LS:R:/p:0", "-c", ""},
		{"command", "-r", "LS:R:/p:0", "-c", "/bin/sh", "-x", ""},
		{"client", "spawn", "-r", "LS:R:/p:0", "-c", "2", "/bin/echo", ""},
		{"direct", "init", "-s", ""},
		{"client", "add_lockspace", "-s", ""},
		{"client", "acquire", "-r", "", "-p", "1"},
	}
	for _, args := range files {
		c, d := completeD(t, nil, args...)
		require.Empty(t, c, "%v", args)
		require.Equal(t, cobra.ShellCompDirectiveDefault, d, "%v: file names", args)
	}
	require.Equal(t, []string{"-A", "-Z", "-a", "-o"}, complete(t, "direct", "dump", "/dev/sdb", ""))
	c, d = completeD(t, nil, "client", "spawn", "-c", "")
	require.Empty(t, c)
	require.Equal(t, cobra.ShellCompDirectiveNoFileComp, d, "spawn -c COUNT")
	require.Contains(t, complete(t, "client", "spawn", "-c", "1", "/bin/true", ""), "-c", "spawn takes -c again")
}

// TestCompletionLockspaces: -s and -r of client actions complete from
// the lockspaces of the running daemon (GET_LOCKSPACES); without a daemon
// they offer nothing (-s) or file names (-r), quietly.
func TestCompletionLockspaces(t *testing.T) {
	noDaemon := func(f *Factory) {
		f.Dial = func() (*client.Client, error) { return client.Dial(t.TempDir()) }
	}
	c, d := completeD(t, noDaemon, "host_status", "-s", "")
	require.Empty(t, c)
	require.Equal(t, cobra.ShellCompDirectiveNoFileComp, d)
	c, d = completeD(t, noDaemon, "client", "acquire", "-r", "")
	require.Empty(t, c)
	require.Equal(t, cobra.ShellCompDirectiveDefault, d)

	synctest.Test(t, func(t *testing.T) {
		dmn := inproc.StartInMemory(t, 1)
		ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: dmn.Path}}
		require.NoError(t, dmn.Client().AddLockspace(context.Background(), ls, 0, 1))
		running := func(f *Factory) { f.Dial = func() (*client.Client, error) { return dmn.Client(), nil } }

		for _, a := range []string{"host_status", "renewal", "set_host", "set_event", "set_config", "locks"} {
			c, d := completeD(t, running, a, "-s", "")
			require.Equal(t, []string{"LS"}, c, a)
			require.Equal(t, cobra.ShellCompDirectiveNoFileComp, d, a)
		}
		full := "LS:1:" + dmn.Path + ":0"
		for _, a := range []string{"inq_lockspace", "rem_lockspace", "read", "align", "examine"} {
			c, _ := completeD(t, running, "client", a, "-s", "")
			require.Equal(t, []string{full}, c, a)
		}
		c, _ := completeD(t, running, "client", "rem_lockspace", "-s", "X")
		require.Empty(t, c, "filtered by what is typed")
		c, d := completeD(t, running, "client", "acquire", "-p", "1", "-r", "L")
		require.Equal(t, []string{"LS:"}, c)
		require.Equal(t, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace, d)
		c, d = completeD(t, running, "client", "acquire", "-r", "LS:R1:/")
		require.Empty(t, c)
		require.Equal(t, cobra.ShellCompDirectiveDefault, d, "the path of a RESOURCE")
		c, d = completeD(t, running, "client", "add_lockspace", "-s", "")
		require.Empty(t, c)
		require.Equal(t, cobra.ShellCompDirectiveDefault, d, "a lockspace to join: file names")
	})
}
