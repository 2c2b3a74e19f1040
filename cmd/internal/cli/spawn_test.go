package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
)

// TestSpawnOptions: the -c COUNT groups of client spawn.
func TestSpawnOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want [][]string
		err  string
	}{
		{[]string{"-r", "L:R:/p:0", "-c", "3", "/bin/sh", "-c", "exit 0", "-c", "1", "/bin/true"},
			[][]string{{"/bin/sh", "-c", "exit 0"}, {"/bin/true"}}, ""},
		{[]string{"-c", "1", "/bin/true", "-r", "L:R:/p:0", "-O", "1"}, [][]string{{"/bin/true"}}, ""},
		{[]string{"-r", "L:R:/p:0", "-c", "2", "/bin/true"}, nil, "spawn -c COUNT past the end of arguments"},
		{[]string{"-r", "L:R:/p:0", "-c", "0", "/bin/true"}, nil, "spawn -c COUNT must be a positive number"},
		{[]string{"-r", "L:R:/p:0", "-c", "x", "/bin/true"}, nil, "spawn -c COUNT must be a positive number"},
		{[]string{"-r", "L:R:/p:0", "-c", "1", "/bin/true", "x"}, nil, "unknown option x"},
	} {
		o := defaultOptions()
		err := scanOptions(o, "client", "spawn", tc.args, &strings.Builder{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || len(o.spawns) != len(tc.want) {
			t.Errorf("%v: %q %v, want %q", tc.args, o.spawns, err, tc.want)
			continue
		}
		for i := range tc.want {
			if strings.Join(o.spawns[i], "\x00") != strings.Join(tc.want[i], "\x00") {
				t.Errorf("%v: program %d %q, want %q", tc.args, i, o.spawns[i], tc.want[i])
			}
		}
	}
}

// spawnTool runs our tool against runDir and returns stdout, stderr and
// the exit status.
func spawnTool(t *testing.T, runDir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.SanlockBinary(t), args...)
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, EnvConfigFile+"=/nonexistent/sanlock.conf")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), rc
}

var fdLine = regexp.MustCompile(`(register done|acquire fd) \d+`)

func normFD(s string) string { return fdLine.ReplaceAllString(s, "$1 FD") }

// TestClientSpawn: client spawn against our daemon. The tool holds the
// leases itself while its programs run one after another as its
// children; a failing program ends the run; the leases are released at
// the end; nothing runs when the register or the acquire fails; a child
// dies with the tool.
func TestClientSpawn(t *testing.T) {
	bin := testutil.SanlockBinary(t)
	runDir := startClusterDaemon(t, bin)
	dir := leaseDir(t)
	f := filepath.Join(dir, "leases")
	if err := os.WriteFile(f, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{
		{"direct", "init", "-o", "1", "-s", "LS:0:" + f + ":0"},
		{"direct", "init", "-r", "LS:R1:" + f + ":1M"},
		{"client", "add_lockspace", "-o", "1", "-s", "LS:1:" + f + ":0"},
	} {
		if out, errOut, rc := spawnTool(t, runDir, a...); rc != 0 {
			t.Fatalf("%v: rc %d: %s%s", a, rc, out, errOut)
		}
	}
	res := "LS:R1:" + f + ":1M"
	status := func() string {
		out, _, _ := spawnTool(t, runDir, "client", "status")
		return out
	}

	// Two programs; the first records its parent and what the daemon
	// lists while it runs.
	ppid, st, second := filepath.Join(dir, "ppid"), filepath.Join(dir, "status"), filepath.Join(dir, "second")
	script := "echo $PPID > " + ppid + "; SANLOCK_RUN_DIR=" + runDir + " " + bin + " client status > " + st
	out, errOut, rc := spawnTool(t, runDir, "client", "spawn", "-r", res,
		"-c", "3", "/bin/sh", "-c", script, "-c", "2", "/usr/bin/touch", second)
	want := "register\nregister done FD\nacquire fd FD\nacquire done 0\nspawn: /bin/sh\nspawn done 0\n" +
		"spawn: /usr/bin/touch\nspawn done 0\nrelease\nrelease done 0\n"
	if normFD(out) != want || rc != 0 || errOut != "" {
		t.Fatalf("spawn: rc %d, stdout %q, stderr %q; want %q", rc, out, errOut, want)
	}
	b, err := os.ReadFile(ppid)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	b, _ = os.ReadFile(st)
	// The lease is the tool's (the program's parent), not the program's.
	if !regexp.MustCompile(`(?m)^r LS:R1:` + regexp.QuoteMeta(f) + `:1048576:\d+ p ` + strconv.Itoa(parent) + `$`).Match(b) {
		t.Errorf("status while the program ran (its parent %d):\n%s", parent, b)
	}
	if _, err := os.Stat(second); err != nil {
		t.Errorf("second program did not run: %v", err)
	}
	if s := status(); strings.Contains(s, "r LS:R1") {
		t.Errorf("lease still held after spawn:\n%s", s)
	}

	// A failing program ends the run; the lease is released all the same.
	third := filepath.Join(dir, "third")
	out, _, rc = spawnTool(t, runDir, "client", "spawn", "-r", res, "-d", "0",
		"-c", "3", "/bin/sh", "-c", "exit 3", "-c", "2", "/usr/bin/touch", third)
	want = "register\nregister done FD\nacquire fd FD\nacquire done 0\nspawn: /bin/sh\nspawn done 3\nrelease\nrelease done 0\n"
	if normFD(out) != want || rc != 1 {
		t.Errorf("failing program: rc %d, %q; want rc 1, %q", rc, out, want)
	}
	if _, err := os.Stat(third); err == nil {
		t.Error("the program after a failed one ran")
	}
	// A program that cannot start, one killed by a signal.
	out, errOut, rc = spawnTool(t, runDir, "client", "spawn", "-r", res, "-c", "1", filepath.Join(dir, "none"))
	if !strings.Contains(out, "spawn done 1\nrelease\nrelease done 0\n") || rc != 1 ||
		errOut != "spawn execv failed: No such file or directory\n" {
		t.Errorf("missing program: rc %d, %q, stderr %q", rc, out, errOut)
	}
	out, _, rc = spawnTool(t, runDir, "client", "spawn", "-r", res, "-c", "3", "/bin/sh", "-c", "kill -9 $$")
	if !strings.Contains(out, "spawn done 1\nrelease\nrelease done 0\n") || rc != 1 {
		t.Errorf("killed program: rc %d, %q", rc, out)
	}

	// No lease, nothing run: an unknown lockspace, no daemon, no -r.
	never := filepath.Join(dir, "never")
	noDaemon := t.TempDir()
	for _, c := range []struct {
		runDir, res, stdout, stderr string
	}{
		{runDir, "XX:R1:" + f + ":1M", "register\nregister done FD\nacquire fd FD\nacquire done -28\n",
			"spawn: acquire failed: " + explain(-28, "") + ": no program run\n"},
		{noDaemon, res, "register\nregister done -2\n", "sanlock: no daemon at " + noDaemon +
			"/sanlock.sock (is sanlock running?)\nspawn: register failed (-2): no program run\n"},
		{runDir, "XX:R1:/p", "resource arg parse error -1\n\n", "sanlock: -r XX:R1:/p: not a resource: " +
			"expected LOCKSPACE:RESOURCE:PATH:OFFSET[:PATH:OFFSET...][:LVER|:SH]\n" +
			"spawn: 1 -r option(s) not usable (see above): no program run\n"},
		{runDir, "", "spawn requires at least one -r resource\n", ""},
	} {
		args := []string{"client", "spawn", "-c", "2", "/usr/bin/touch", never}
		if c.res != "" {
			args = append(args, "-r", c.res)
		}
		out, errOut, rc := spawnTool(t, c.runDir, args...)
		if normFD(out) != c.stdout || errOut != c.stderr || rc != 1 {
			t.Errorf("%v: rc %d, %q, stderr %q; want rc 1, %q, %q", args, rc, out, errOut, c.stdout, c.stderr)
		}
		if _, err := os.Stat(never); err == nil {
			t.Fatalf("%v: the program ran without its lease", args)
		}
	}

	// Killing the tool (the holder of the lease) kills its program.
	childPid := filepath.Join(dir, "child")
	cmd := exec.Command(bin, "client", "spawn", "-r", res, "-c", "3", "/bin/sh", "-c",
		"echo $$ > "+childPid+"; exec sleep 300")
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, EnvConfigFile+"=/nonexistent/sanlock.conf")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var child int
	waitFor(t, "the spawned program", func() bool {
		b, err := os.ReadFile(childPid)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	_ = cmd.Process.Kill()
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(child, 0) == nil {
		// A zombie until init reaps it: gone once its state is Z.
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("program %d outlived the tool that held its lease", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "the lease to go", func() bool { return !strings.Contains(status(), "r LS:R1") })
}

// TestSpawnVs511: our client spawn and 5.1.1's, both against a 5.1.1
// daemon, print the same lines on stdout and exit alike (the fd number
// aside). Ours adds a stderr line when nothing runs.
func TestSpawnVs511(t *testing.T) {
	tr := debtree.Get(t, "sid")
	real := tr.StartDaemon(t, "")
	dir := leaseDir(t)
	f := filepath.Join(dir, "leases")
	if err := os.WriteFile(f, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{
		{"direct", "init", "-s", "LS:0:" + f + ":0"},
		{"direct", "init", "-r", "LS:R1:" + f + ":1048576"},
		{"client", "add_lockspace", "-s", "LS:1:" + f + ":0"},
	} {
		if out, err := real.Client(t, a...); err != nil {
			t.Fatalf("%v: %v: %s", a, err, out)
		}
	}
	res := "LS:R1:" + f + ":1048576"
	run511 := func(args ...string) (string, int) {
		cmd := tr.Command(&debtree.Options{RunDir: real.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}},
			append([]string{"sanlock"}, args...)...)
		out, err := cmd.Output()
		rc := 0
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), rc
	}
	for _, args := range [][]string{
		{"-r", res, "-c", "1", "/bin/true", "-c", "3", "/bin/sh", "-c", "exit 0"},
		{"-r", res, "-c", "3", "/bin/sh", "-c", "exit 3", "-c", "1", "/bin/true"},
		{"-r", res, "-c", "3", "/bin/sh", "-c", "kill -9 $$"},
		{"-r", res, "-O", "1", "-P", "1", "-d", "1", "-h", "1", "-c", "1", "/bin/true"},
		{"-r", res, "-h", "1", "-c", "1", "/bin/true"},
		{"-r", "XX:R1:" + f + ":1048576", "-c", "1", "/bin/true"},
		{"-r", res, "-c", "2", "/bin/true"},
		{"-r", res},
	} {
		a := append([]string{"client", "spawn"}, args...)
		cOut, cRC := run511(a...)
		gOut, _, gRC := spawnTool(t, real.HostRunDir(), a...)
		if normFD(cOut) != normFD(gOut) || cRC != gRC {
			t.Errorf("%v:\n5.1.1 rc %d:\n%s\nours rc %d:\n%s", args, cRC, cOut, gRC, gOut)
		}
	}
}
