package interop

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// python3-sanlock differential tests of the resource-lease calls. Each
// lease-holding client is a resources_agent.py process (see its doc) that
// registers once and runs the commands the test sends on its stdin; the
// same steps run against sanlock 3.8.5 and our daemon (layout and helpers:
// resource_interop_test.go).

// rtAgent is one registered python client.
type rtAgent struct {
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	done  chan struct{}
	err   error
}

// agent starts a registered python client under the symbolic name name.
func (s *rtSide) agent(py, name string) *rtAgent {
	cmd := exec.Command(py, pyScript("resources_agent.py"), s.path)
	return s.startAgent(name, cmd)
}

// startAgent starts cmd, a resources_agent.py, under the symbolic name
// name, and waits for its "ready PID" line.
func (s *rtSide) startAgent(name string, cmd *exec.Cmd) *rtAgent {
	a := &rtAgent{name: name, cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	a.cmd.Env = sanlockEnv(s.dir)
	a.cmd.Stderr = os.Stderr
	out, err := a.cmd.StdoutPipe()
	if err == nil {
		a.in, err = a.cmd.StdinPipe()
	}
	if err == nil {
		err = a.cmd.Start()
	}
	if err != nil {
		s.fail(fmt.Errorf("agent %s: %w", name, err))
		close(a.done)
		close(a.lines)
		return a
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
		close(a.lines)
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	ready := a.read(s)
	pid, ok := strings.CutPrefix(ready, "ready ")
	if n, err := strconv.Atoi(pid); !ok || err != nil {
		s.fail(fmt.Errorf("agent %s: %q", name, ready))
	} else {
		s.setPid(n, name)
	}
	return a
}

func (a *rtAgent) read(s *rtSide) string {
	select {
	case l, ok := <-a.lines:
		if !ok {
			return "(agent gone)"
		}
		return l
	case <-time.After(30 * time.Second):
		s.fail(fmt.Errorf("agent %s: no answer", a.name))
		return "(no answer)"
	}
}

// do sends one command line to agent a and records its answer.
func (s *rtSide) do(a *rtAgent, line string) string {
	if _, err := io.WriteString(a.in, s.expand(line)+"\n"); err != nil {
		s.record(fmt.Sprintf("%s %s: (write: agent gone)", a.name, s.label(line)))
		return ""
	}
	ans := s.norm(a.read(s))
	s.record(fmt.Sprintf("%s %s: %s", a.name, s.label(line), ans))
	return ans
}

// doUntil repeats a command (every 200 ms, 15 s at most) until its answer
// is want, and records the last answer.
func (s *rtSide) doUntil(a *rtAgent, line, want string) {
	var ans string
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := io.WriteString(a.in, s.expand(line)+"\n"); err != nil {
			ans = "(write: agent gone)"
			break
		}
		if ans = s.norm(a.read(s)); ans == want || time.Now().After(end) {
			break
		}
	}
	s.record(fmt.Sprintf("%s %s (until %s): %s", a.name, s.label(line), want, ans))
}

// kill signals agent a and records how it ended.
func (s *rtSide) kill(a *rtAgent, sig syscall.Signal) {
	if a.cmd.Process != nil {
		_ = a.cmd.Process.Signal(sig)
	}
	s.waitAgent(a, fmt.Sprintf("%s after %v", a.name, sig))
}

// waitAgent waits (20 s at most) for agent a to end and records how.
func (s *rtSide) waitAgent(a *rtAgent, label string) {
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		s.fail(fmt.Errorf("%s: agent %s did not exit", label, a.name))
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	s.record(label + ": " + rtExit(a.err))
}

func (a *rtAgent) stop() {
	if a.cmd.Process == nil {
		return
	}
	select {
	case <-a.done:
	default:
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// pollFile waits (10 s at most) until file p exists and records its
// normalised content.
func (s *rtSide) pollFile(label, p string) {
	var b []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(p); err == nil && len(b) > 0 {
			break
		}
	}
	s.record(label + ": " + s.norm(strings.TrimSpace(string(b))))
}

// rtPyScenario is the python3-sanlock sequence: write/read_resource,
// acquire/release EX and SH, versions, LVB, owners, convert (libsanlock),
// request, killpath and examine, and the error cases.
func rtPyScenario(py, killpath string) func(*rtSide) {
	return func(s *rtSide) {
		A, B, C := s.agent(py, "A"), s.agent(py, "B"), s.agent(py, "C")
		defer A.stop()
		defer B.stop()
		defer C.stop()

		// Disk-only calls.
		s.do(A, "write_resource LS:R9:9M")
		s.do(A, "read_resource 9M")
		s.do(A, "write_resource LS:R9:9M num_hosts=4")
		s.do(A, "read_owners LS:R9:9M")
		s.do(A, "write_resource LS:R9:9M clear")
		s.do(A, "read_resource 9M")
		s.do(A, "read_resource 1M")
		s.do(A, "read_resource 0")
		s.do(A, "read_resource 10M")

		// Exclusive.
		s.do(A, "acquire LS:R1:1M")
		s.do(A, "inquire")
		s.do(A, "acquire LS:R1:1M")
		s.do(B, "acquire LS:R1:1M")
		s.do(B, "acquire LS:R1:1M shared")
		s.do(A, "read_owners LS:R1:1M")
		s.do(A, "read_resource 1M")
		s.do(C, "inquire pid=<A>")
		s.do(C, "inquire pid=1")
		s.do(A, "release LS:R1:1M")
		s.do(A, "release LS:R1:1M")
		s.do(A, "read_owners LS:R1:1M")
		s.do(A, "inquire")

		// Shared by two pids.
		s.do(A, "acquire LS:R2:2M shared")
		s.do(B, "acquire LS:R2:2M shared")
		s.do(C, "acquire LS:R2:2M")
		s.do(A, "read_owners LS:R2:2M")
		s.do(B, "inquire")
		s.pollStatus("status SH by two", rtCount(2))

		// Versions.
		s.do(A, "acquire LS:R3:3M version=5")
		s.do(A, "acquire LS:R3:3M version=0")
		s.do(A, "inquire")
		s.do(A, "release LS:R3:3M")
		s.do(A, "acquire LS:R3:3M version=1")
		s.do(A, "inquire")
		s.do(A, "release LS:R3:3M")

		// LVB.
		s.do(A, "acquire LS:R4:4M lvb")
		s.do(A, "get_lvb LS:R4:4M 16")
		s.do(A, "set_lvb LS:R4:4M hello-lvb")
		s.do(A, "get_lvb LS:R4:4M 16")
		s.do(A, "set_lvb LS:R4:4M fill=512")
		s.do(A, "set_lvb LS:R4:4M fill=513")
		s.do(A, "set_lvb LS:R4:4M fill=4097")
		s.do(A, "set_lvb LS:R4:4M hello-lvb")
		s.do(A, "release LS:R4:4M")
		s.do(B, "acquire LS:R4:4M lvb")
		s.do(B, "get_lvb LS:R4:4M 16")
		s.do(B, "get_lvb LS:R4:4M 4096")
		s.do(B, "get_lvb LS:R4:4M 0")
		s.do(B, "release LS:R4:4M")
		s.do(B, "acquire LS:R4:4M")
		s.do(B, "set_lvb LS:R4:4M x")
		s.do(B, "get_lvb LS:R4:4M 16")
		s.do(B, "set_lvb LS:R5:5M x")
		s.do(B, "get_lvb LS:R5:5M 16")
		s.do(B, "release LS:R4:4M")
		s.do(A, "acquire LS:R4:4M lvb shared")
		s.do(A, "get_lvb LS:R4:4M 16")
		s.do(A, "set_lvb LS:R4:4M from-sh")
		s.do(A, "release LS:R4:4M")
		s.do(A, "acquire LS:R4:4M lvb")
		s.do(A, "get_lvb LS:R4:4M 16")
		s.do(A, "release LS:R4:4M")

		// Convert (libsanlock; flags: 0x4 = SHARED).
		s.do(C, "acquire LS:R6:6M")
		s.do(C, "cconvert LS:R6:6M 0 0")
		s.do(C, "cconvert LS:R6:6M 0 0x4")
		s.do(C, "inquire")
		s.do(A, "read_owners LS:R6:6M")
		s.do(C, "cconvert LS:R6:6M 0 0x4")
		s.do(C, "cconvert LS:R6:6M 0 0")
		s.do(C, "inquire")
		s.do(C, "cconvert LS:R5:5M 0 0")
		s.do(B, "cconvert LS:R6:6M 0 0x4 pid=<C>")
		s.do(C, "release LS:R6:6M")
		// SH to EX with another local SH holder (quirk Q4).
		s.do(A, "cconvert LS:R2:2M 0 0")
		s.do(A, "inquire")
		s.do(B, "inquire")
		s.pollStatus("status after SH->EX with a local SH", rtCount(2))
		s.do(A, "release LS:R2:2M")
		s.do(B, "release LS:R2:2M")
		s.do(A, "read_owners LS:R2:2M")

		// Acquire flags (libsanlock; cmd flags 0x1 LVB, 0x2 ORPHAN,
		// 0x4 ORPHAN_ONLY, 0x8 OWNER_NOWAIT).
		s.do(A, "cacquire LS:R5:5M 0x5 0")
		s.do(A, "cacquire LS:R5:5M 0x4 0")
		s.do(A, "cacquire LS:R3:3M 0x2 0")
		s.do(A, "read_owners LS:R7:7M")
		s.do(B, "cacquire LS:R5:5M 0x8 0")
		s.do(C, "cacquire LS:R6:6M 0 0 pid=<B>")
		s.do(B, "inquire")
		s.do(A, "crelease - 0x1")
		s.do(A, "inquire")
		s.do(B, "crelease LS:R6:6M 0")

		// Error cases.
		s.do(A, "acquire LX:R1:1M")
		s.do(A, "acquire LS:R8:8M")
		s.do(A, "acquire LS:R1:1M path=/nonexistent")
		s.do(A, "acquire LS:R1:10M")
		s.do(A, "acquire LS:R2:1M")
		s.do(A, "acquire LS:RRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRR:1M")
		s.do(A, "acquire LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL:R1:1M")
		s.do(A, "acquire LS:R1:1M pid=1")
		s.do(A, "release LX:R1:1M")
		s.do(A, "request LX:R1:1M force")
		s.do(A, "request LS:R1:10M force")
		s.do(A, "read_owners LS:R8:8M")
		s.do(A, "read_owners LS:R1:10M")
		s.do(A, "set_lvb LX:R1:1M x")
		s.do(A, "inquire")

		// Requests on a lease held by A, whose kill program records a
		// GRACEFUL request; FORCE then kills A.
		out := filepath.Join(filepath.Dir(s.path), "killpath.out")
		s.mu.Lock()
		s.extra[out] = "KILLOUT"
		s.extra[killpath] = "KILLPATH"
		s.mu.Unlock()
		s.do(A, "killpath "+killpath+" "+out+" graceful arg2")
		s.do(A, "acquire LS:R1:1M")
		s.do(B, "request LS:R1:1M force version=1")
		s.do(B, "request LS:R1:1M graceful")
		s.do(B, "request LS:R1:1M graceful version=5")
		s.do(B, "request LS:R1:1M force version=4")
		s.do(B, "request LS:R1:1M none version=0")
		s.do(B, "request LS:R1:1M graceful version=4")
		s.do(B, "request LS:R5:5M force")
		s.do(B, "cexamine LS:R1:1M")
		s.pollFile("kill program", out)
		s.do(A, "inquire")
		s.do(B, "request LS:R1:1M force")
		s.do(B, "request LS:R1:1M force version=4")
		s.do(B, "cexamine LS:R1:1M")
		s.waitAgent(A, "A after FORCE")
		s.pollStatus("status after A died", rtCount(0))
		s.do(B, "read_owners LS:R1:1M")
		s.do(B, "acquire LS:R1:1M")
		s.do(B, "inquire")

		// GRACEFUL without a kill program: SIGTERM.
		s.do(C, "acquire LS:R3:3M")
		s.do(B, "request LS:R3:3M graceful")
		s.do(B, "cexamine LS:R3:3M")
		s.waitAgent(C, "C after GRACEFUL")
		s.pollStatus("status after C died", rtCount(1))
		s.do(B, "release LS:R1:1M")

		// R7 is owned by host 2, which never renews (rtForeignOwner): with
		// OWNER_NOWAIT, -243 (owner seen alive) until the daemon has seen
		// host 2's timestamp unchanged, then -247. A -247 can also come
		// before the daemon's first check of host 2 (the acquire watched
		// the timestamp for 1 s itself); that first check counts as a
		// sighting, so the next acquire may answer -243 again until the
		// following check. Both acquires therefore wait for -247.
		s.doUntil(B, "cacquire LS:R7:7M 0x8 0", "err -247")
		s.doUntil(B, "cacquire LS:R7:7M 0x8 0x4", "err -247")
		s.do(B, "inquire")
		s.do(B, "exit")
		s.waitAgent(B, "B after exit")
		s.pollStatus("status at the end", rtCount(0))
		s.disk("disk at the end")
	}
}

// TestRtPythonResources compares rtPyScenario between sanlock 3.8.5 and
// our daemon.
func TestRtPythonResources(t *testing.T) {
	t.Parallel()
	py := testutil.PythonSanlock(t)
	needRealSanlock(t)
	killpath, err := filepath.Abs(filepath.Join("testdata", "resources", "killpath.sh"))
	if err != nil {
		t.Fatal(err)
	}
	sides := []*rtSide{rtRealSide(t, "sanlock")}
	sides = append(sides, rtOurSide(t))
	start := time.Now()
	rtPrepare(t, true, sides...)
	t.Logf("prepare: %v", time.Since(start).Round(time.Millisecond))
	rtParallel(sides, rtPyScenario(py, killpath))
	t.Logf("total: %v", time.Since(start).Round(time.Millisecond))
	rtShutdown(sides)
	rtCompare(t, sides)
	rtGolden(t, "python.golden", sides[0].out)
}

// rtDeathScenario: clients die holding leases; plain leases are released
// and can be acquired by others, persistent ones become orphans that are
// adopted (ORPHAN) or released (REL_ORPHAN).
func rtDeathScenario(py string) func(*rtSide) {
	return func(s *rtSide) {
		A, B := s.agent(py, "A"), s.agent(py, "B")
		defer B.stop()
		// resource flags: 0x4 SHARED, 0x8 PERSISTENT.
		s.do(A, "acquire LS:R1:1M")
		s.do(A, "cacquire LS:R2:2M 0 0x8")
		s.do(A, "acquire LS:R3:3M shared")
		s.do(B, "acquire LS:R3:3M shared")
		s.do(A, "cacquire LS:R4:4M 0 0xc")
		s.do(A, "acquire LS:R5:5M lvb")
		s.do(A, "set_lvb LS:R5:5M dying")
		s.pollStatus("status before", rtCount(6))
		s.kill(A, syscall.SIGKILL)
		s.pollStatus("status after A died", rtCount(3))
		s.do(B, "read_owners LS:R1:1M")
		s.do(B, "read_owners LS:R2:2M")
		s.do(B, "read_owners LS:R3:3M")
		s.do(B, "read_owners LS:R4:4M")
		s.do(B, "acquire LS:R1:1M")
		s.do(B, "acquire LS:R5:5M lvb")
		s.do(B, "get_lvb LS:R5:5M 8")
		s.do(B, "acquire LS:R2:2M")
		s.do(B, "cacquire LS:R2:2M 0x2 0x4")
		s.do(B, "cacquire LS:R2:2M 0x2 0")
		s.do(B, "inquire")
		s.do(B, "cacquire LS:R4:4M 0x2 0")
		s.do(B, "cacquire LS:R4:4M 0x4 0")
		s.do(B, "crelease LS:R9:0 0x4")
		s.do(B, "crelease LS::0 0x4")
		s.pollStatus("status after REL_ORPHAN", rtCount(4))
		s.do(B, "cacquire LS:R4:4M 0x5 0x4")
		s.do(B, "cacquire LS:R4:4M 0 0x4")
		s.do(B, "inquire")
		s.do(B, "read_owners LS:R4:4M")

		// The adopted lease was persistent; the adopting pid dies too.
		s.kill(B, syscall.SIGTERM)
		s.pollStatus("status after B died", rtCount(0))
		C := s.agent(py, "C")
		defer C.stop()
		s.do(C, "cacquire LS:R2:2M 0x6 0")
		s.do(C, "acquire LS:R2:2M")
		s.do(C, "acquire LS:R1:1M")
		s.do(C, "acquire LS:R3:3M")
		s.do(C, "acquire LS:R4:4M")
		s.do(C, "crelease LS::0 0x4")
		s.pollStatus("status at the end", rtCount(4))
		s.do(C, "exit")
		s.waitAgent(C, "C after exit")
		s.pollStatus("status after C exited", rtCount(0))
		for i := 1; i <= 5; i++ {
			s.cli("client", "read", "-r", fmt.Sprintf("LS:R%d:PATH:%d", i, i<<20), "-h", "1")
		}
		s.disk("disk at the end")
	}
}

// TestRtClientDeath compares rtDeathScenario between sanlock 3.8.5 and our
// daemon.
func TestRtClientDeath(t *testing.T) {
	t.Parallel()
	py := testutil.PythonSanlock(t)
	needRealSanlock(t)
	sides := []*rtSide{rtRealSide(t, "sanlock")}
	sides = append(sides, rtOurSide(t))
	start := time.Now()
	rtPrepare(t, false, sides...)
	rtParallel(sides, rtDeathScenario(py))
	t.Logf("total: %v", time.Since(start).Round(time.Millisecond))
	rtShutdown(sides)
	rtCompare(t, sides)
	rtGolden(t, "death.golden", sides[0].out)
}
