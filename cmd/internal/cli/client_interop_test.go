package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// The client actions are compared with the real sanlock 3.8.5 tool: both
// talk to one real C daemon, and their stdout lines and exit codes must
// agree after normalising values that legitimately differ (timestamps,
// lease versions that moved on, descriptor numbers).

const (
	cSanlock    = "/usr/sbin/sanlock"
	sysPython   = "/usr/bin/python3"
	asSanlockEV = "GOSANLOCK_TEST_AS_SANLOCK"
)

// asSanlock lets the test binary act as the sanlock tool (for client
// command, which execs and so cannot run in-process).
func asSanlock() {
	if os.Getenv(asSanlockEV) == "1" {
		os.Exit(Main(append([]string{"sanlock"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
}

var normRE = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b(timestamp|last_check|last_live|monotime|helper_last_status|renewal_last_attempt|renewal_last_success|acquire_last_attempt|acquire_last_success|read_ms|write_ms|fd|helper_kill_fd|cmd_last)=\d+`), "$1=N"},
	{regexp.MustCompile(`timestamp \d+`), "timestamp N"},
	{regexp.MustCompile(`(register done|acquire fd) \d+`), "$1 N"},
}

func normalise(s string) string {
	for _, n := range normRE {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

func needC(t *testing.T) {
	t.Helper()
	testenv.NeedBinary(t, cSanlock)
}

// startDaemon starts a real sanlock daemon in its own run dir.
func startDaemon(t *testing.T) string {
	t.Helper()
	runDir, err := os.MkdirTemp("/tmp", "gsl-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	cmd := exec.Command(cSanlock, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1")
	cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+runDir)
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			return
		default:
		}
		cmd.Process.Kill()
		<-done
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(runDir, "sanlock.sock")); err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("daemon did not start: %s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return runDir
}

// runC runs the real tool with args; stdbuf keeps the lines of client
// command that the C stdio buffer would lose at exec.
func runC(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("stdbuf", append([]string{"-o0", cSanlock}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), rc
}

// runGoExe runs our tool as a separate process (the test binary itself).
func runGoExe(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asSanlockEV+"=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), rc
}

// runCommand runs bin with args and extra environment, its stdout a pipe,
// or with tty a terminal (script(1) gives it a pseudo-terminal; its CRLF
// line ends are turned back into LF).
func runCommand(t *testing.T, tty bool, env []string, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if tty {
		q := make([]string, 0, len(args)+1)
		for _, a := range append([]string{bin}, args...) {
			q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
		}
		cmd = exec.Command("script", "-qec", strings.Join(q, " "), "/dev/null")
	}
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(out.String(), "\r\n", "\n"), rc
}

// same runs args with both tools (C first) and compares.
func same(t *testing.T, args ...string) {
	t.Helper()
	cOut, cRC := runC(t, args...)
	gOut, gRC := runMain(t, args...)
	// status lists the daemon's connections, and a tool's connection that
	// has just closed can still be listed (as "p -1 ") for a moment after
	// it exits: a read-only status is run again, both tools, until the
	// daemon has settled (a lasting difference still fails).
	for try := 0; try < 5 && isStatus(args) && (normalise(cOut) != normalise(gOut) || cRC != gRC); try++ {
		time.Sleep(200 * time.Millisecond)
		cOut, cRC = runC(t, args...)
		gOut, gRC = runMain(t, args...)
	}
	check(t, args, cOut, cRC, gOut, gRC)
}

func isStatus(args []string) bool {
	return len(args) >= 2 && args[0] == "client" && args[1] == "status"
}

func check(t *testing.T, args []string, cOut string, cRC int, gOut string, gRC int) {
	t.Helper()
	if normalise(cOut) != normalise(gOut) || cRC != gRC {
		t.Errorf("%v:\n--- sanlock (rc %d)\n%s--- ours (rc %d)\n%s", args, cRC, cOut, gRC, gOut)
	}
}

// sequence runs a list of commands with the C tool, then the same list
// with ours, and compares each step; the list must leave the daemon as it
// found it.
func sequence(t *testing.T, norm func(string) string, cmds ...[]string) {
	t.Helper()
	type res struct {
		out string
		rc  int
	}
	var cRes []res
	for _, a := range cmds {
		o, rc := runC(t, a...)
		cRes = append(cRes, res{norm(o), rc})
	}
	for i, a := range cmds {
		o, rc := runMain(t, a...)
		// A status step may catch the previous step's connection still
		// closing on either side (see same): it is read-only, and the
		// daemon is where the C tool's run had it at this step, so both
		// tools run it again until they agree (a lasting difference still
		// fails).
		for try := 0; try < 5 && isStatus(a) && (norm(o) != cRes[i].out || rc != cRes[i].rc); try++ {
			time.Sleep(200 * time.Millisecond)
			co, crc := runC(t, a...)
			cRes[i] = res{norm(co), crc}
			o, rc = runMain(t, a...)
		}
		check(t, a, cRes[i].out, cRes[i].rc, norm(o), rc)
	}
}

func noNorm(s string) string { return s }

// waitReleased waits until the daemon shows no held resource (leases of an
// exited process are released asynchronously).
func waitReleased(t *testing.T) {
	t.Helper()
	for i := 0; i < 100; i++ {
		out, _ := runMain(t, "client", "status")
		if !strings.Contains(out, "\nr ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("leases still held")
}

// lverRE matches the lease version after a resource's offset.
var (
	lverRE  = regexp.MustCompile(`(leases:\d+):\d+`)
	tokenRE = regexp.MustCompile(`\b(lver|res_id|token_id|reused)=\d+`)
)

// normLver hides lease versions and token ids, which move on between the
// two runs of a sequence.
func normLver(s string) string {
	return tokenRE.ReplaceAllString(lverRE.ReplaceAllString(s, "$1:V"), "$1=N")
}

func cl(args ...string) []string { return append([]string{"client"}, args...) }

func TestClientNoDaemon(t *testing.T) {
	needC(t)
	dir, err := os.MkdirTemp("/tmp", "gsl-none-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv("SANLOCK_RUN_DIR", dir)
	L := "LS:R1:/var/tmp/nonexistent:1M"
	for _, a := range [][]string{
		{"status"}, {"status", "-D"}, {"status", "-o", "p"}, {"gets"}, {"gets", "-h", "1"},
		{"host_status"}, {"host_status", "-s", "LS"}, {"renewal", "-s", "LS"}, {"renewal"},
		{"log_dump"}, {"shutdown"}, {"shutdown", "-f", "1", "-w", "1"},
		{"add_lockspace", "-s", "LS:1:/x:0"}, {"add_lockspace", "-o", "3", "-s", "LS:1:/x:0"},
		{"inq_lockspace", "-s", "LS:1:/x:0"}, {"rem_lockspace", "-s", "LS:1:/x:0"},
		{"init", "-s", "LS:0:/x:0"}, {"init", "-r", L}, {"init"}, {"init", "-r", "LS:R1"},
		{"read", "-s", "LS:0:/x:0"}, {"read", "-r", L}, {"read", "-r", L, "-h", "1"}, {"read"},
		{"command", "-r", L, "-c", "/bin/true"},
		{"acquire", "-r", L, "-p", "5"}, {"convert", "-r", "LS:R1", "-p", "5"}, {"convert"},
		{"release", "-r", "LS:R1", "-p", "5"}, {"release", "-p", "5", "-a", "1"},
		{"inquire", "-p", "5"}, {"inquire", "-p", "5", "-D"},
		{"request", "-r", L, "-f", "0"}, {"request"}, {"examine", "-r", "LS:R1"}, {"examine"},
		{"examine", "-s", "LS:1:/x:0"}, {"align", "-s", "LS:1:/x:0"}, {"version"},
		{"set_event", "-s", "LS", "-i", "1", "-e", "1", "-d", "1"}, {"set_config", "-s", "LS", "-u", "1"},
		{"format", "-x", "LS:/x:0"}, {"format", "-x", "LS"}, {"create", "-x", "LS:/x:0", "-e", "A"},
		{"delete", "-x", "LS:/x:0", "-e", "A"}, {"lookup", "-x", "LS:/x:0"}, {"update", "-x", "LS:/x:0", "-e", "A"},
		{"rebuild", "-x", "LS:/x:0"}, {"rebuild"},
	} {
		if a[0] == "command" {
			// Deliberately not 3.8.5's exit 0: nothing ran.
			cOut, _ := runC(t, cl(a...)...)
			gOut, gRC := runMain(t, cl(a...)...)
			check(t, cl(a...), cOut, 1, gOut, gRC)
			continue
		}
		same(t, cl(a...)...)
	}
	// The implicit client form.
	same(t, "gets")
	same(t, "version")
}

func TestClientVsC(t *testing.T) {
	needC(t)
	runDir := startDaemon(t)
	t.Setenv("SANLOCK_RUN_DIR", runDir)
	dir := leaseDir(t)
	leases := filepath.Join(dir, "leases")
	if err := os.WriteFile(leases, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(leases, 32<<20); err != nil {
		t.Fatal(err)
	}
	lsArg := "LS:1:" + leases + ":0"
	res := func(name string, mib int, suffix ...string) string {
		return strings.Join(append([]string{fmt.Sprintf("LS:%s:%s:%dM", name, leases, mib)}, suffix...), ":")
	}
	for _, a := range [][]string{
		{"direct", "init", "-s", "LS:0:" + leases + ":0", "-o", "1"},
		{"direct", "init", "-r", res("R1", 1)},
		{"direct", "init", "-r", res("R2", 2)},
		{"direct", "init", "-r", res("R3", 3)},
		cl("add_lockspace", "-o", "1", "-s", lsArg),
	} {
		if out, rc := runC(t, a...); rc != 0 {
			t.Fatalf("%v: %s", a, out)
		}
	}

	t.Run("info", func(t *testing.T) {
		for _, a := range [][]string{
			{"version"}, {"status"}, {"status", "-D"}, {"status", "-o", "p"}, {"status", "-o", "s"},
			{"gets"}, {"gets", "-h", "1"}, {"host_status"}, {"host_status", "-s", "LS"},
			{"host_status", "-s", "LS", "-D"}, {"host_status", "-s", "NOPE"}, {"renewal"},
			{"align", "-s", lsArg}, {"align"},
			{"read", "-s", "LS:0:" + leases + ":0"}, {"read", "-s", "LS:0:" + leases + ":0", "-D"},
			{"read", "-s", "LS:0:/nonexistent:0"}, {"read", "-s", "LS:0:" + leases + ":5M"},
			{"read", "-r", res("R1", 1)}, {"read", "-r", res("R1", 1), "-D"}, {"read", "-r", res("R1", 1), "-D", "-h", "1"},
			{"read", "-r", "::" + leases + ":1M"}, {"read", "-r", res("R1", 9)}, {"read", "-r", "LS:R1"},
			{"inq_lockspace", "-s", lsArg}, {"inq_lockspace", "-s", "LS"}, {"add_lockspace", "-s", lsArg},
			{"add_lockspace", "-s", "LS:2:" + leases + ":0"}, {"rem_lockspace", "-s", "LS9:1:" + leases + ":0"},
			{"examine", "-s", "LS"}, {"examine", "-s", lsArg}, {"examine", "-r", "LS:R1"}, {"examine", "-r", "LS"},
			{"set_config", "-s", "LS"}, {"set_config", "-s", "LS", "-u", "1"}, {"set_config", "-s", "LS", "-u", "0"},
			{"set_config", "-s", "LS", "-O", "0"}, {"set_config", "-s", "NOPE", "-O", "1"}, {"set_config"},
			{"set_config", "-s", "LS", "-u", "7"}, {"set_config", "-s", "LS", "-u", "-1"}, {"set_config", "-s", "LS", "-u", "abc"},
			{"set_config", "-s", "LS", "-O", "7"}, {"acquire", "-r", "LS:R1", "-p", "1"}, {"acquire", "-r", "LS:R1"},
			{"request", "-r", res("R1", 1, "0"), "-f", "0"}, {"request", "-r", "LS:R1"},
			{"inquire"}, {"acquire"}, {"release"}, {"convert"}, {"inquire", "-p", "1"},
			{"shutdown"}, {"shutdown", "-w", "1"}, {"unknown_action"},
		} {
			same(t, cl(a...)...)
		}
		// Renewal history grows between the two runs: compare its shape.
		c, crc := runC(t, cl("renewal", "-s", "LS")...)
		g, grc := runMain(t, cl("renewal", "-s", "LS")...)
		firstLine := func(s string) string { return normalise(strings.SplitN(s, "\n", 2)[0]) }
		if crc != grc || firstLine(c) != firstLine(g) || strings.Count(g, "\n") < 1 {
			t.Errorf("renewal: C (%d) %q, ours (%d) %q", crc, c, grc, g)
		}
		// log_dump: the daemon's log plus a newline, exit 1. The log only
		// grows, so the C tool's dump is a prefix of ours.
		c, crc = runC(t, cl("log_dump")...)
		g, grc = runMain(t, cl("log_dump")...)
		if crc != 1 || grc != 1 || !strings.HasSuffix(g, "\n") || len(c) < 100 ||
			!strings.HasPrefix(g, strings.TrimSuffix(c, "\n")) {
			t.Errorf("log_dump: C rc %d, ours rc %d, %.200q", crc, grc, g)
		}
	})

	t.Run("init", func(t *testing.T) {
		for _, a := range [][]string{
			{"init", "-s", "LS2:0:" + leases + ":8M", "-o", "3"}, {"read", "-s", "LS2:0:" + leases + ":8M", "-D"},
			{"write", "-s", "LS3:0:" + leases + ":9M", "-Z", "512", "-A", "1M"}, {"read", "-s", "LS3:0:" + leases + ":9M", "-D"},
			{"init", "-s", "LS3:0:" + leases + ":9M", "-Z", "512"},
			{"init", "-r", res("R5", 5), "-m", "3", "-n", "5"}, {"read", "-r", res("R5", 5), "-D"},
			{"init", "-r", res("R6", 6), "-z", "1"}, {"read", "-r", res("R6", 6)},
			{"init", "-r", "LS:R7"}, {"init", "-s", "LS"}, {"init"},
		} {
			same(t, cl(a...)...)
		}
		// -m is what the daemon writes as num_hosts (the -m/-n quirk).
		out, _ := runC(t, "direct", "read_leader", "-r", res("R5", 5))
		if !strings.Contains(out, "num_hosts 3\n") {
			t.Errorf("init -r -m 3 wrote:\n%s", out)
		}
	})

	t.Run("rindex", func(t *testing.T) {
		x := "LS:" + leases + ":12M"
		sequence(t, noNorm,
			cl("format", "-x", x), cl("create", "-x", x, "-e", "RX1"), cl("create", "-x", x, "-e", "RX2"),
			cl("lookup", "-x", x), cl("lookup", "-x", x, "-e", "RX1"), cl("lookup", "-x", x, "-e", "NOPE"),
			cl("lookup", "-x", x, "-e", ":0"), cl("delete", "-x", x, "-e", "RX2"), cl("delete", "-x", x, "-e", "RX2"),
			cl("update", "-x", x, "-e", "RX9:7340032"), cl("update", "-x", x, "-e", "RX9", "-z", "0"),
			cl("update", "-x", x, "-e", "RX9:7340032", "-z", "0"), cl("rebuild", "-x", x),
			cl("format", "-x", "LS:"+leases+":20M", "-Z", "512", "-A", "1M"),
		)
	})

	t.Run("set_event", func(t *testing.T) {
		a := cl("set_event", "-s", "LS", "-i", "1", "-e", "5", "-d", "7")
		runC(t, a...)
		same(t, a...) // the same event again: accepted
		same(t, cl("set_event", "-s", "LS", "-i", "1", "-g", "3", "-e", "0x10", "-d", "0x7")...)
		same(t, cl("set_event", "-s", "LS")...)
	})

	t.Run("pid", func(t *testing.T) {
		testenv.NeedBinary(t, sysPython)
		py := exec.Command(sysPython, "-c",
			"import sanlock,time; sanlock.register(); print('ok', flush=True); time.sleep(300)")
		stdout, _ := py.StdoutPipe()
		py.Stderr = os.Stderr
		if err := py.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { py.Process.Kill(); py.Wait() }()
		if l, _ := bufio.NewReader(stdout).ReadString('\n'); l != "ok\n" {
			t.Skipf("python3-sanlock helper failed: %q", l)
		}
		p := fmt.Sprint(py.Process.Pid)
		same(t, cl("status")...)
		sequence(t, normLver,
			cl("acquire", "-p", p, "-r", res("R1", 1), "-r", res("R2", 2, "SH")),
			cl("acquire", "-p", p, "-r", res("R1", 1)),
			cl("inquire", "-p", p), cl("inquire", "-p", p, "-D"),
			cl("status"), cl("status", "-o", "p"), cl("status", "-o", "s"), cl("status", "-D"),
			cl("read", "-r", res("R2", 2), "-h", "1", "-D"), cl("read", "-r", res("R1", 1), "-h", "1"),
			cl("convert", "-p", p, "-r", res("R2", 2)), cl("convert", "-p", p, "-r", "LS:R2"),
			cl("inquire", "-p", p),
			cl("convert", "-p", p, "-r", res("R1", 1, "SH")), cl("convert", "-p", p, "-r", "LS:R1"),
			cl("release", "-p", p, "-r", "LS:R1"), cl("release", "-p", p, "-r", "LS:R1"),
			cl("inquire", "-p", p),
			cl("release", "-p", p, "-a", "1"), cl("inquire", "-p", p),
			cl("acquire", "-p", p, "-r", res("R3", 3), "-n", "4"), cl("release", "-p", p, "-r", "LS:R3"),
			cl("release", "-p", p, "-O", "1", "-s", "LS"),
		)
	})

	t.Run("command", func(t *testing.T) {
		for _, a := range [][]string{
			cl("command", "-r", res("R3", 3), "-c", "/bin/sh", "-c",
				`echo held; `+cSanlock+` client status | grep -c '^r LS:R3'`),
			cl("command", "-r", res("R9", 9), "-c", "/bin/echo"),
			cl("command", "-c", "/bin/echo", "hi"),
			cl("command", "-r", res("R3", 3), "-c", "/nonexistent"),
		} {
			// Into a pipe (the lines are lost at exec) and on a terminal
			// (each line shows as it is written).
			for _, tty := range []bool{false, true} {
				cOut, cRC := runCommand(t, tty, nil, cSanlock, a...)
				waitReleased(t)
				gOut, gRC := runCommand(t, tty, []string{asSanlockEV + "=1"}, os.Args[0], a...)
				waitReleased(t)
				if a[len(a)-1] == "/nonexistent" {
					cRC = 1 // deliberately: a program that did not run is a failure
				}
				if tty {
					// The terminal shows stderr too: our line that says
					// why the program did not run is not 3.8.5's.
					gOut = dropDiagnostics(gOut)
				}
				check(t, append([]string{fmt.Sprintf("tty=%v", tty)}, a...), cOut, cRC, gOut, gRC)
			}
		}
	})

	t.Run("lockspace", func(t *testing.T) {
		// Byte offsets: the C tool's "M" rewrite reads an unterminated
		// buffer and sometimes adds stray digits (16M became 168M).
		ls4 := "LS4:1:" + leases + ":16777216"
		sequence(t, noNorm,
			cl("init", "-s", "LS4:0:"+leases+":16777216", "-o", "1"),
			cl("add_lockspace", "-o", "1", "-s", ls4), cl("inq_lockspace", "-s", ls4), cl("gets"),
			cl("rem_lockspace", "-s", ls4), cl("inq_lockspace", "-s", ls4),
		)
	})

	t.Run("shutdown", func(t *testing.T) {
		if out, rc := runMain(t, cl("rem_lockspace", "-s", lsArg)...); rc != 0 {
			t.Fatalf("rem_lockspace: %s", out)
		}
		out, rc := runMain(t, cl("shutdown", "-w", "1")...)
		if rc != 0 || out != "shutdown force 0 wait 1\nshutdown done 0\n" {
			t.Errorf("shutdown -w 1: rc %d %q", rc, out)
		}
	})
}

// dropDiagnostics removes the lines gosanlock adds on stderr when a
// command fails (docs/cli.md "Diagnostics on stderr").
func dropDiagnostics(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(l, "sanlock: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}
