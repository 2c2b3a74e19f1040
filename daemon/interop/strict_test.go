package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/testenv"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// Strict peer mode (strict.go): the impersonation attempts,
// made with python3-sanlock by processes running as uid 65534, against
// sanlock 3.8.5, our daemon in its default mode (both must let them
// through) and our daemon with strict_peer (which must refuse them with
// -EPERM while own-pid operations and privileged peers still work).

const strictUID = 65534 // nobody

var strictCiFd = regexp.MustCompile(`ci=\d+ fd=\d+`)

// strictUnregScript releases a lease for another pid from a connection
// that never registered.
const strictUnregScript = `import sys, sanlock
ls, name, off = sys.argv[2].split(":")
try:
    sanlock.release(ls.encode(), name.encode(), [(sys.argv[1], int(off[:-1]) << 20)], pid=int(sys.argv[3]))
    print("ok None")
except sanlock.SanlockException as e:
    print("err %d" % e.errno)
`

// strictEnv holds the python scripts where uid 65534 can read them.
type strictEnv struct {
	py, dir string
}

func newStrictEnv(t *testing.T, py string) *strictEnv {
	dir := testutil.ShortTempDir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(pyScript("resources_agent.py"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.py"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "unreg.py"), []byte(strictUnregScript), 0o644))
	return &strictEnv{py: py, dir: dir}
}

// cred is nil for root, else uid/gid 65534 with the given supplementary
// groups only.
func strictCred(groups ...uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: strictUID, Gid: strictUID, Groups: groups}}
}

// agent starts resources_agent.py (registered) as name, with attr's
// credentials (nil: as the test's user).
func (e *strictEnv) agent(s *rtSide, name string, attr *syscall.SysProcAttr) *rtAgent {
	cmd := exec.Command(e.py, filepath.Join(e.dir, "agent.py"), s.path)
	cmd.Dir = e.dir
	cmd.SysProcAttr = attr
	return s.startAgent(name, cmd)
}

// unreg runs the unregistered release as uid 65534 and records it.
func (e *strictEnv) unreg(s *rtSide, res, pidName string) {
	cmd := exec.Command(e.py, filepath.Join(e.dir, "unreg.py"), s.path, res, s.expand("<"+pidName+">"))
	cmd.Dir = e.dir
	cmd.Env = sanlockEnv(s.dir)
	cmd.SysProcAttr = strictCred()
	out, err := cmd.Output()
	if err != nil {
		s.fail(fmt.Errorf("unreg: %w", err))
	} else {
		s.setPid(cmd.Process.Pid, "U")
	}
	s.record(fmt.Sprintf("U release %s pid=<%s>: %s", res, pidName, s.norm(strings.TrimSpace(string(out)))))
}

// strictScenario: A (root) holds R1; B (uid 65534, registered) inquires,
// acquires for and releases A's lease; U (uid 65534, unregistered)
// releases it; B works on its own leases; G (uid 65534 in the daemon's
// group, root) and C (root) act for A.
func strictScenario(e *strictEnv) func(*rtSide) {
	return func(s *rtSide) {
		if err := rtPrepareOne(s, false); err != nil {
			s.fail(err)
			return
		}
		a := e.agent(s, "A", nil)
		defer a.stop()
		b := e.agent(s, "B", strictCred())
		defer b.stop()
		g := e.agent(s, "G", strictCred(0))
		defer g.stop()
		c := e.agent(s, "C", nil)
		defer c.stop()

		s.do(a, "acquire LS:R1:1M")
		s.do(b, "inquire pid=<A>")
		s.do(b, "acquire LS:R2:2M pid=<A>")
		s.do(a, "inquire")
		s.do(b, "release LS:R1:1M pid=<A>")
		e.unreg(s, "LS:R2:2M", "A")
		s.do(a, "inquire")

		s.do(b, "acquire LS:R3:3M")
		s.do(b, "acquire LS:R4:4M pid=<B>")
		s.do(b, "inquire pid=<B>")
		s.do(b, "release LS:R4:4M pid=<B>")
		s.do(b, "release LS:R3:3M")
		s.do(b, "inquire")
		s.do(b, "killpath /bin/true")

		s.do(g, "inquire pid=<A>")
		s.do(c, "inquire pid=<A>")
		s.do(c, "release LS:R1:1M pid=<A>")
		s.do(a, "inquire")

		s.do(a, "acquire LS:R6:6M lvb")
		s.do(a, "set_lvb LS:R6:6M mine")
		s.do(b, "get_lvb LS:R6:6M 4")
		s.do(b, "set_lvb LS:R6:6M evil")
		s.do(a, "get_lvb LS:R6:6M 4")
		s.do(c, "get_lvb LS:R6:6M 4")

		// A leaves a persistent lease behind as an orphan (flags 0x8).
		s.do(a, "cacquire LS:R5:5M 0 0x8")
		_, _ = a.in.Write([]byte("exit\n"))
		s.waitAgent(a, "A exit")
		s.pollStatus("orphan", rtCount(1))
		s.do(b, "crelease LS:R5:0 0x4")
		s.do(c, "crelease LS:R5:0 0x4")
		for _, x := range []*rtAgent{b, g, c} {
			_, _ = x.in.Write([]byte("exit\n"))
			s.waitAgent(x, x.name+" exit")
		}
	}
}

// strictOurSide starts our daemon with the socket owned by uid 65534 and
// group root (so that uid 65534 can connect and is not in the group).
func strictOurSide(t *testing.T, name string, strict bool) (*rtSide, *testDaemon) {
	td := startDaemon(t, func(c *daemon.Config, d *daemon.Deps) {
		c.OurHostName = "hostX"
		c.SetIDs(strictUID, 0)
		c.StrictPeer = strict
	})
	require.NoError(t, os.Chmod(td.dir, 0o755))
	return rtNewSide(name, td.dir, testutil.LeaseFile(t, 16<<20), realSanlock), td
}

func TestStrictPeerPython(t *testing.T) {
	t.Parallel()
	py := testutil.PythonSanlock(t)
	needRealSanlock(t)
	testenv.NeedRoot(t, "the impersonating clients run as uid 65534")
	e := newStrictEnv(t, py)

	realDir := testutil.ShortTempDir(t)
	realDaemon(t, realDir, "-e", "hostX", "-U", "nobody", "-G", "root")
	require.NoError(t, os.Chmod(realDir, 0o755))
	t.Cleanup(func() { rtShutdownReal(realDir) })
	real := rtNewSide("sanlock 3.8.5", realDir, testutil.LeaseFile(t, 16<<20), realSanlock)
	real.real = true
	dflt, _ := strictOurSide(t, "gosanlock default", false)
	strict, std := strictOurSide(t, "gosanlock strict_peer", true)

	sides := []*rtSide{real, dflt, strict}
	start := time.Now()
	rtParallel(sides, strictScenario(e))
	rtShutdown(sides)
	t.Logf("scenario on three daemons in parallel: %v", time.Since(start).Round(time.Millisecond))

	for _, s := range sides {
		require.Empty(t, s.errs, s.name)
	}
	t.Logf("%s:\n%s", real.name, strings.Join(real.out, "\n"))
	assert.Equal(t, real.out, dflt.out, "default mode must match sanlock 3.8.5")
	const (
		r1   = "{disks=[(PATH, 1048576)] flags=1 lockspace=LS resource=R1 version=1}"
		r2   = "{disks=[(PATH, 2097152)] flags=1 lockspace=LS resource=R2 version=1}"
		r3r4 = "[{disks=[(PATH, 3145728)] flags=1 lockspace=LS resource=R3 version=1}, " +
			"{disks=[(PATH, 4194304)] flags=1 lockspace=LS resource=R4 version=1}]"
	)
	own := []string{
		"B acquire LS:R3:3M: ok None",
		"B acquire LS:R4:4M pid=<B>: ok None",
		"B inquire pid=<B>: ok " + r3r4,
		"B release LS:R4:4M pid=<B>: ok None",
		"B release LS:R3:3M: ok None",
		"B inquire: ok []",
	}
	exits := []string{"B exit: exit 0", "G exit: exit 0", "C exit: exit 0"}
	// 3.8.5 (and our default mode) let every impersonation through.
	want := []string{
		"A acquire LS:R1:1M: ok None",
		"B inquire pid=<A>: ok [" + r1 + "]",
		"B acquire LS:R2:2M pid=<A>: ok None",
		"A inquire: ok [" + r1 + ", " + r2 + "]",
		"B release LS:R1:1M pid=<A>: ok None",
		"U release LS:R2:2M pid=<A>: ok None",
		"A inquire: ok []",
	}
	want = append(want, own...)
	want = append(want,
		"B killpath /bin/true: ok None",
		"G inquire pid=<A>: ok []",
		"C inquire pid=<A>: ok []",
		"C release LS:R1:1M pid=<A>: err 1",
		"A inquire: ok []",
		"A acquire LS:R6:6M lvb: ok None",
		"A set_lvb LS:R6:6M mine: ok None",
		"B get_lvb LS:R6:6M 4: ok mine",
		"B set_lvb LS:R6:6M evil: ok None",
		"A get_lvb LS:R6:6M 4: ok evil",
		"C get_lvb LS:R6:6M 4: ok evil",
		"A cacquire LS:R5:5M 0 0x8: ok 0",
		"A exit: exit 0",
		"orphan: r LS:R5:PATH:5242880:1 p A ORPHAN",
		"B crelease LS:R5:0 0x4: ok 1",
		"C crelease LS:R5:0 0x4: ok 0")
	assert.Equal(t, append(want, exits...), real.out)

	// strict_peer: the uid 65534 peers get -EPERM for A's pid, their own
	// pid still works, and root or the daemon's group may act for A.
	t.Logf("%s:\n%s", strict.name, strings.Join(strict.out, "\n"))
	want = []string{
		"A acquire LS:R1:1M: ok None",
		"B inquire pid=<A>: err 1",
		"B acquire LS:R2:2M pid=<A>: err 1",
		"A inquire: ok [" + r1 + "]",
		"B release LS:R1:1M pid=<A>: err 1",
		"U release LS:R2:2M pid=<A>: err 1",
		"A inquire: ok [" + r1 + "]",
	}
	want = append(want, own...)
	want = append(want,
		"B killpath /bin/true: err 1",
		"G inquire pid=<A>: ok ["+r1+"]",
		"C inquire pid=<A>: ok ["+r1+"]",
		"C release LS:R1:1M pid=<A>: ok None",
		"A inquire: ok []",
		"A acquire LS:R6:6M lvb: ok None",
		"A set_lvb LS:R6:6M mine: ok None",
		"B get_lvb LS:R6:6M 4: err 1",
		"B set_lvb LS:R6:6M evil: err 1",
		"A get_lvb LS:R6:6M 4: ok mine",
		"C get_lvb LS:R6:6M 4: ok mine",
		"A cacquire LS:R5:5M 0 0x8: ok 0",
		"A exit: exit 0",
		"orphan: r LS:R5:PATH:5242880:1 p A ORPHAN",
		"B crelease LS:R5:0 0x4: err -1",
		"C crelease LS:R5:0 0x4: ok 1")
	assert.Equal(t, append(want, exits...), strict.out)

	// One log line per refusal, naming the peer and the target pid.
	var logged []string
	for _, e := range std.logs.FilterMessageSnippet("refused by strict_peer").All() {
		logged = append(logged, strict.norm(strictCiFd.ReplaceAllString(testutil.LogText(e), "ci=N fd=N")))
	}
	assert.Equal(t, []string{
		"cmd_inquire refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=A",
		"cmd_acquire refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=A",
		"cmd_release refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=A",
		"cmd_release refused by strict_peer ci=N fd=N peer_pid=U uid=65534 gid=65534 target_pid=A",
		"cmd_killpath refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=-1",
		"cmd_get_lvb refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=A",
		"cmd_set_lvb refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=A",
		"cmd_release refused by strict_peer ci=N fd=N peer_pid=B uid=65534 gid=65534 target_pid=-1",
	}, logged)
}
