package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/testdisk"
)

// runMainErr runs the tool in-process and returns stdout, stderr and the
// exit status.
func runMainErr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	f := testFactory(&out, &errb)
	rc := f.Main(args)
	f.Out.Flush()
	return out.String(), errb.String(), rc
}

// TestExplain: a code's name, number and generic text, or the daemon's
// cause instead of the text.
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		code  int
		cause string
		want  string
	}{
		{-19, "", "ENODEV (-19): no such device: the lease path could not be opened"},
		{-28, "", "ENOSPC (-28): lockspace not joined (run add_lockspace first), or no room for another lockspace or lease"},
		{-243, "", "SANLK_ACQUIRE_IDLIVE (-243): held by another host, which is alive"},
		{-262, "host_id 1 is in use by host2", "SANLK_HOSTID_BUSY (-262): host_id 1 is in use by host2"},
		{-999, "", "error (-999): unknown error"},
	} {
		if got := explain(tc.code, tc.cause); got != tc.want {
			t.Errorf("explain(%d, %q) = %q, want %q", tc.code, tc.cause, got, tc.want)
		}
	}
	if got := failLine("add_lockspace", -19, ""); !strings.HasPrefix(got, "sanlock: add_lockspace failed: ENODEV (-19): ") {
		t.Errorf("failLine: %q", got)
	}
	// Every code with a name has an explanation of its own or a text.
	for code := -1; code > -300; code-- {
		if e := explain(code, ""); strings.HasSuffix(e, ": ") {
			t.Errorf("explain(%d) has no text: %q", code, e)
		}
	}
}

// TestNoDaemonLine: with no daemon, the actions that print nothing on
// stdout (3.8.5's silence) say so on stderr; the others keep their
// stdout and add the same line.
func TestNoDaemonLine(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SANLOCK_RUN_DIR", dir)
	want := "sanlock: no daemon at " + dir + "/sanlock.sock (is sanlock running?)\n"
	for _, tc := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"client", "status"}, ""},
		{[]string{"client", "renewal", "-s", "LS"}, ""},
		{[]string{"client", "host_status", "-s", "LS"}, ""},
		{[]string{"client", "gets"}, "gets error -2\n"},
		{[]string{"client", "add_lockspace", "-s", "LS:1:/x:0"}, "add_lockspace\nadd_lockspace done -2\n"},
		{[]string{"client", "acquire", "-r", "LS:R1:/x:1M", "-p", "5"}, "acquire pid 5\nacquire done -2\n"},
	} {
		out, errOut, rc := runMainErr(t, tc.args...)
		if out != tc.stdout || errOut != want || rc != 1 {
			t.Errorf("%v: rc %d, stdout %q, stderr %q; want rc 1, %q, %q", tc.args, rc, out, errOut, tc.stdout, want)
		}
	}
}

// TestNameTooLong: a lockspace name over 48 bytes is refused with a line
// on stderr (sanlock cuts it); 48 bytes are accepted.
func TestNameTooLong(t *testing.T) {
	f := filepath.Join(leaseDir(t), "leases")
	if err := os.WriteFile(f, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	n49 := strings.Repeat("N", 49)
	for _, args := range [][]string{
		{"direct", "init", "-s", n49 + ":0:" + f + ":0"},
		{"direct", "read_leader", "-s", n49 + ":1:" + f + ":0"},
		{"client", "add_lockspace", "-s", n49 + ":1:" + f + ":0"},
	} {
		out, errOut, rc := runMainErr(t, args...)
		want := `sanlock: lockspace name "` + n49 + `" is 49 bytes, longer than the 48 a lease can hold` + "\n"
		if out != "" || errOut != want || rc != 1 {
			t.Errorf("%v: rc %d, stdout %q, stderr %q", args, rc, out, errOut)
		}
	}
	if out, errOut, rc := runMainErr(t, "direct", "init", "-s", n49[:48]+":0:"+f+":0"); rc != 0 || errOut != "" {
		t.Errorf("48 bytes: rc %d %q %q", rc, out, errOut)
	}
}

// TestCommandNeverUnprotected: client command runs its program only under
// its leases. A -r that does not parse (a name over 48 bytes), a lockspace
// not joined, no daemon, a lease held elsewhere (with --wait) and a
// failed exec each end it with exit status 1 and one line on stderr,
// the program not run. With --wait, a terminal shows the retries; a pipe
// does not. Runs against a real 3.8.5 daemon.
func TestCommandNeverUnprotected(t *testing.T) {
	needC(t)
	runDir := startDaemon(t)
	t.Setenv("SANLOCK_RUN_DIR", runDir)
	dir := leaseDir(t)
	f := filepath.Join(dir, "leases")
	if err := os.WriteFile(f, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{
		{"direct", "init", "-o", "1", "-s", "LS:0:" + f + ":0"},
		{"direct", "init", "-r", "LS:R1:" + f + ":1M"},
		{"client", "add_lockspace", "-o", "1", "-s", "LS:1:" + f + ":0"},
	} {
		if out, rc := runMain(t, a...); rc != 0 {
			t.Fatalf("%v: rc %d: %s", a, rc, out)
		}
	}
	res := "LS:R1:" + f + ":1M"
	never := filepath.Join(dir, "never")
	touch := []string{"-c", "/usr/bin/touch", never}
	notRun := func(args []string) {
		t.Helper()
		if _, err := os.Stat(never); err == nil {
			t.Fatalf("%v: the program ran without its lease", args)
		}
	}
	long := "LS:" + strings.Repeat("R", 49) + ":" + f + ":1M"
	for _, tc := range []struct {
		runDir string
		args   []string
		stdout string
		stderr []string
	}{
		{runDir, append([]string{"client", "command", "-r", long}, touch...), "resource arg parse error -1\n\n",
			[]string{`sanlock: -r ` + long + `: resource name "` + strings.Repeat("R", 49) + `" is 49 bytes, longer than the 48 a lease can hold`,
				"sanlock: command refused, /usr/bin/touch not run: 1 -r option(s) not usable (see above)"}},
		{runDir, append([]string{"client", "command", "-r", "XX:R1:" + f + ":1M"}, touch...),
			"register\nregister done FD\nacquire fd FD\nacquire done -28\n",
			[]string{"sanlock: command refused, /usr/bin/touch not run: acquire failed: " + explain(-28, "")}},
		{dir, append([]string{"client", "command", "-r", res}, touch...), "register\nregister done -2\n",
			[]string{"sanlock: command refused, /usr/bin/touch not run: no daemon at " + dir + "/sanlock.sock (is sanlock running?)"}},
		{runDir, []string{"client", "command", "-r", res, "-c", "/nonexistent"},
			"register\nregister done FD\nacquire fd FD\nacquire done 0\n",
			[]string{"execv failed: No such file or directory"}},
	} {
		out, errOut, rc := spawnTool(t, tc.runDir, tc.args...)
		want := strings.Join(tc.stderr, "\n") + "\n"
		if normFD(out) != tc.stdout || errOut != want || rc != 1 {
			t.Errorf("%v: rc %d, stdout %q, stderr %q; want rc 1, %q, %q", tc.args, rc, out, errOut, tc.stdout, want)
		}
		notRun(tc.args)
		waitReleased(t)
	}

	// Another process holds R1.
	holder := exec.Command(os.Args[0], "client", "command", "-r", res, "-c", "/bin/sleep", "120")
	holder.Env = append(os.Environ(), asSanlockEV+"=1")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = holder.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = holder.Process.Kill()
			<-exited
		}
	})
	waitFor(t, "the holder's lease", func() bool {
		out, _ := runMain(t, "client", "status", "-D")
		return strings.Contains(out, "r LS:R1") && strings.Contains(out, "list=held")
	})

	// --wait that runs out: refused, on a pipe without progress, on a
	// terminal with it.
	args := append([]string{"client", "command", "--wait", "2", "-r", res}, touch...)
	out, errOut, rc := spawnTool(t, runDir, args...)
	if normFD(out) != "register\nregister done FD\nacquire fd FD\nacquire done -17\n" || rc != 1 ||
		errOut != "sanlock: command refused, /usr/bin/touch not run: acquire failed: "+explain(-17, "")+"\n" {
		t.Errorf("pipe %v: rc %d, stdout %q, stderr %q", args, rc, out, errOut)
	}
	notRun(args)
	tty, rc := runCommand(t, true, []string{asSanlockEV + "=1"}, os.Args[0], args...)
	t.Logf("tty: %q", tty)
	if rc != 1 || !strings.Contains(tty, "sanlock: acquire: EEXIST (-17), retrying for ") || !strings.Contains(tty, "retrying for") ||
		!strings.Contains(tty, "acquire done -17\n") || !strings.Contains(tty, "command refused") {
		t.Errorf("tty %v: rc %d, %q", args, rc, tty)
	}
	notRun(args)

	// acquire --wait for a pid that is not registered fails at once.
	start := time.Now()
	out, errOut, rc = spawnTool(t, runDir, "client", "acquire", "-r", res, "--wait", "30s")
	if rc != 1 || time.Since(start) > 10*time.Second || !strings.HasPrefix(out, "acquire pid -1\nacquire done -") ||
		!strings.HasPrefix(errOut, "sanlock: acquire failed: ") {
		t.Errorf("acquire --wait, no pid: rc %d after %v, %q, %q", rc, time.Since(start), out, errOut)
	}
	t.Logf("acquire --wait, no pid: %q %q", out, errOut)

	// --wait that outlives the holder: the program runs under the lease.
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, errOut, rc := spawnTool(t, runDir, append([]string{"client", "command", "--wait", "60", "-r", res}, touch...)...)
		if rc != 0 || out != "" || errOut != "" {
			t.Errorf("--wait 60: rc %d, %q, %q", rc, out, errOut)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	_ = holder.Process.Kill()
	<-done
	if _, err := os.Stat(never); err != nil {
		t.Errorf("--wait 60: the program did not run: %v", err)
	}
}

// TestAddLockspaceProgress: on a terminal, add_lockspace draws its phase
// and the seconds left on stderr while it joins; into a pipe stderr stays
// empty and stdout is 3.8.5's. Runs against a real 3.8.5 daemon.
func TestAddLockspaceProgress(t *testing.T) {
	needC(t)
	runDir := startDaemon(t)
	t.Setenv("SANLOCK_RUN_DIR", runDir)
	f := filepath.Join(leaseDir(t), "leases")
	if err := os.WriteFile(f, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, rc := runMain(t, "direct", "init", "-o", "1", "-s", "LS:0:"+f+":0"); rc != 0 {
		t.Fatalf("init: %d %s", rc, out)
	}
	// A lockspace the daemon does not know: stdout as 3.8.5 (nothing),
	// the code explained on stderr.
	out, errOut, rc := spawnTool(t, runDir, "client", "host_status", "-s", "NOPE")
	if out != "" || rc != 1 || !strings.HasPrefix(errOut, "sanlock: host_status failed: ") {
		t.Errorf("host_status -s NOPE: rc %d, %q, %q", rc, out, errOut)
	}
	t.Logf("host_status -s NOPE: %q", errOut)

	add := []string{"client", "add_lockspace", "-o", "1", "-s", "LS:1:" + f + ":0"}
	rem := []string{"client", "rem_lockspace", "-s", "LS:1:" + f + ":0"}

	out, errOut, rc = spawnTool(t, runDir, add...)
	if out != "add_lockspace_timeout 1\nadd_lockspace_timeout done 0\n" || errOut != "" || rc != 0 {
		t.Errorf("pipe: rc %d, %q, %q", rc, out, errOut)
	}
	if _, _, rc := spawnTool(t, runDir, rem...); rc != 0 {
		t.Fatalf("rem_lockspace: %d", rc)
	}
	tty, rc := runCommand(t, true, []string{asSanlockEV + "=1"}, os.Args[0], add...)
	t.Logf("tty: %q", tty)
	if rc != 0 || !strings.Contains(tty, "sanlock: add_lockspace LS: acquiring host_id 1, then checking that no other host wrote it: ") ||
		!strings.Contains(tty, "add_lockspace_timeout done 0\n") {
		t.Errorf("tty: rc %d, %q", rc, tty)
	}
	if _, _, rc := spawnTool(t, runDir, rem...); rc != 0 {
		t.Fatalf("rem_lockspace: %d", rc)
	}
}

// TestNameTooLongScan: -x and the -e of the index actions are refused
// too; other -e values (a host name, an event) are not names of a lease.
func TestNameTooLongScan(t *testing.T) {
	n49 := strings.Repeat("N", 49)
	for _, tc := range []struct {
		action string
		args   []string
		refuse bool
	}{
		{"format", []string{"-x", n49 + ":/p:0"}, true},
		{"create", []string{"-x", "LS:/p:0", "-e", n49}, true},
		{"update", []string{"-x", "LS:/p:0", "-e", n49 + ":1M"}, true},
		{"create", []string{"-x", "LS:/p:0", "-e", n49[:48]}, false},
		{"set_event", []string{"-s", "LS", "-e", n49}, false},
		{"acquire", []string{"-s", n49[:48] + ":1:/p:0"}, false},
	} {
		err := scanOptions(defaultOptions(), "client", tc.action, tc.args, &strings.Builder{})
		if _, ok := err.(*refusedError); ok != tc.refuse {
			t.Errorf("%s %v: %v, want refused %v", tc.action, tc.args, err, tc.refuse)
		}
	}
}

// keptMem is a memory device that stays open across the watch's reads.
type keptMem struct{ *testdisk.Mem }

func (keptMem) Close() error { return nil }

// TestWatchAddLockspaceInUse: the add_lockspace progress says at its first
// read, on a line that stays, that the host_id was last held by another
// host and when the join fails if that host is alive; it says the host_id
// is in use as soon as its delta lease is seen renewed by another host,
// with the seconds until the daemon gives up; before that it shows the
// watch phase with the seconds left.
func TestWatchAddLockspaceInUse(t *testing.T) {
	mem := testdisk.NewMem(1<<20, 512)
	put := func(hostID uint64, ts uint64) {
		l := diskfmt.Leader{Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, SectorSize: 512,
			OwnerID: hostID, OwnerGeneration: 1, SpaceName: diskfmt.MustName("LS"),
			ResourceName: diskfmt.MustName("otherhost"), Timestamp: ts, IOTimeout: 1}
		b := make([]byte, 512)
		l.Seal(b)
		if err := mem.WriteAt(context.Background(), b, diskfmt.DeltaSectorOffset(hostID, 512)); err != nil {
			t.Fatal(err)
		}
	}
	put(1, 0)
	put(2, 100)
	var errb syncBuffer
	c := &clientRun{err: errors.New("no daemon in this test")}
	prog := &progress{w: &errb}
	open := func(string) (diskfmt.Device, error) { return keptMem{mem}, nil }
	ls := client.Lockspace{Name: "LS", HostID: 2, Disk: client.Disk{Path: "/mem"}}
	stop := c.watchAddLockspace(prog, ls, 1, false, open)
	waitFor(t, "the watch line", func() bool { return strings.Contains(errb.String(), "watching it for a live owner") })
	put(2, 101) // the other host renews
	waitFor(t, "the in-use line", func() bool { return strings.Contains(errb.String(), "is in use by otherhost") })
	stop()
	got := errb.String()
	held := delta.AcquireHeldDelay(1, delta.DefaultWatchdogFireTimeout)
	for _, want := range []string{
		fmt.Sprintf("\r\x1b[Ksanlock: add_lockspace LS: host_id 2 was last held by otherhost (timestamp 100): if otherhost is alive, this join fails in about %d s\n", held),
		fmt.Sprintf("\r\x1b[Ksanlock: add_lockspace LS: host_id 2 was last held by otherhost: watching it for a live owner, %d s left", held+2),
		"\r\x1b[Ksanlock: add_lockspace LS: host_id 2 is in use by otherhost (renewed 0 s ago): it will fail with SANLK_HOSTID_BUSY in ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("the line is not cleared at the end: %q", got)
	}
	if n := strings.Count(got, "if otherhost is alive"); n != 1 {
		t.Errorf("the first-read line is written %d times: %q", n, got)
	}

	// A free host_id (timestamp 0): no such line.
	var free syncBuffer
	prog = &progress{w: &free}
	stop = c.watchAddLockspace(prog, client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: "/mem"}}, 1, false, open)
	waitFor(t, "the free host_id's line", func() bool { return strings.Contains(free.String(), "acquiring host_id 1") })
	stop()
	if strings.Contains(free.String(), "last held by") {
		t.Errorf("a free host_id is said held: %q", free.String())
	}

	// Not a terminal: nothing is drawn, nothing is read.
	if p := newProgress(&errb, false); p != nil {
		t.Errorf("progress on a pipe: %v", p)
	}
}

// syncBuffer is a bytes.Buffer safe for the watch goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
