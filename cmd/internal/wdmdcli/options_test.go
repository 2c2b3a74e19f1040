package wdmdcli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

const cWdmd = "/usr/sbin/wdmd"

func TestParse(t *testing.T) {
	var errb bytes.Buffer
	o, act := parse("wdmd", []string{"-DH1", "-G", "grp", "-S1", "-s", "/x", "-k", "7z", "-w", strings.Repeat("d", 70), "-p", "extra"}, &errb)
	require.Equal(t, actDaemon, act)
	require.Empty(t, errb.String())
	require.True(t, o.foreground)
	require.True(t, o.probe)
	require.Equal(t, 1, o.highPriority)
	require.Equal(t, "grp", o.group)
	require.Equal(t, 1, o.allowScripts)
	require.Equal(t, "/x", o.scriptDir)
	require.Equal(t, 7, o.killScriptSec) // atoi
	require.Len(t, o.device, 63)

	o, act = parse("wdmd", []string{"--run-dir=/r", "--shm-marker", "/m", "--test-device", "/s", "--test-interval", "2", "--grid-only", "--trace-records"}, &errb)
	require.Equal(t, actDaemon, act)
	require.Equal(t, "/r", o.runDir)
	require.Equal(t, "/m", o.marker)
	require.Equal(t, "/s", o.testDevice)
	require.Equal(t, 2, o.testInterval)
	require.True(t, o.gridOnly)
	require.True(t, o.trace)

	o, act = parse("wdmd", []string{"-t", "30", "-F"}, &errb)
	require.Equal(t, actDaemon, act)
	require.Equal(t, 30, o.tryTimeout)
	require.True(t, o.tryGiven)
	require.True(t, o.forceFire)
	o, _ = parse("wdmd", []string{"--trytimeout=5", "--forcefire", "-t0"}, &errb)
	require.Equal(t, 0, o.tryTimeout)
	require.True(t, o.tryGiven)
	require.True(t, o.forceFire)
	require.Empty(t, errb.String())

	o, act = parse("wdmd", nil, &errb)
	require.Equal(t, actDaemon, act)
	require.Equal(t, defaultOptions(), o)
}

type result struct {
	stdout, stderr string
	code           int
}

func runTool(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{o.String(), strings.ReplaceAll(e.String(), bin+":", "wdmd:"), cmd.ProcessState.ExitCode()}
}

// TestOutputsMatchCWdmd runs both binaries with the same arguments and
// compares stdout, stderr and the exit code. Options that would start a
// daemon are not used here (without -D the daemon forks and exit 0
// tells nothing). The version is 3.8.5's; the help text is that of 3.9.5
// and 5.1.1 (which list -t and -F), compared with the wdmd of the sid
// tree (scripts/debian-trees.sh) when it is built.
func TestOutputsMatchCWdmd(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-V"}, {"--version"}, {"-Z", "-V"}, {"-V", "-Z"},
		{"--foo", "-V"}, {"-VZ"}, {"-wfoo", "-V"}, {"extra", "-V"}, {"-H1", "-G", "x", "--version"},
	} {
		want := runTool(t, cWdmd, args...)
		got := runTool(t, wdmdBin, args...)
		require.Equal(t, want, got, "args %q", args)
	}
	tr := debtree.Get(t, "sid")
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-h", "-Z"}, {"-H1", "--help"}, {"-Z", "-h"}} {
		want := runCmd(t, tr.Command(nil, append([]string{"wdmd"}, args...)...))
		got := runTool(t, wdmdBin, args...)
		require.Equal(t, want, got, "args %q", args)
	}
}

// runCmd runs cmd and returns its outputs and exit status.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{o.String(), e.String(), cmd.ProcessState.ExitCode()}
}

// TestFixedPathsMatchCWdmd compares the runs that use the fixed paths
// (/run/wdmd, /dev/shm/wdmd): -d without a daemon, probe without a
// device, and -D without a device. It holds the run-dir lock.
func TestFixedPathsMatchCWdmd(t *testing.T) {
	t.Parallel()
	lockRunDir(t)
	if m, _ := filepath.Glob("/dev/watchdog*"); len(m) > 0 {
		// never arm a real watchdog from a test
		t.Skipf("a real watchdog device exists (%v)", m)
	}
	_, err := os.Stat("/dev/shm/wdmd")
	require.True(t, os.IsNotExist(err), "/dev/shm/wdmd exists: a wdmd runs or crashed here")
	for _, args := range [][]string{{"-d"}, {"-p"}, {"--probe", "-w", "/nonexistent/wd"}} {
		want := runTool(t, cWdmd, args...)
		got := runTool(t, wdmdBin, args...)
		require.Equal(t, want, got, "args %q", args)
	}
	// -D: both start, find no device and exit 255. The lines are those of
	// wdmd 3.9+ (no start line without a device; epoch, date and time
	// before each): compared with the sid tree's wdmd, run in a private
	// mount namespace (its own /run and /dev/shm), when it is built.
	strip := func(r result) result {
		var ls []string
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			ls = append(ls, dPrefix.ReplaceAllString(l, ""))
		}
		r.stderr = strings.Join(ls, "\n")
		return r
	}
	// Both exit at once; one that waited for a device would hang the test
	// (its timeout reports it).
	got := strip(runTool(t, wdmdBin, "-D"))
	require.Equal(t, result{"", "no watchdog device, load a watchdog driver", 255}, got)
	tr := debtree.Get(t, "sid")
	require.Equal(t, got, strip(runCmd(t, tr.Command(&debtree.Options{RunDir: t.TempDir()}, "wdmd", "-D"))))
	_, err = os.Stat("/dev/shm/wdmd")
	require.True(t, os.IsNotExist(err))
	_, err = os.Stat("/run/wdmd/wdmd.pid")
	require.True(t, os.IsNotExist(err))
}
