package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// TestReexecMixed: on our daemon (host 1) a
// python3-sanlock holder keeps an EX and an SH lease and a persistent
// lease is left as an orphan; the C sanlock (host 2) joins the same
// lockspace; holders on both hosts loop acquire/record/release on a third
// resource (30% shared) while our daemon reexecs 20 times. The exclusion
// checker finds no violation, the python holder's pid and registration
// are intact and its inquire answer (lver included) unchanged, the orphan
// is still ours, the C host can take neither the EX lease nor the orphan,
// and our renewal history since the first renewal after the join has no
// gap over the renewal interval (2 s at io_timeout 1, +1 s of
// whole-second rounding).
func TestReexecMixed(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import sanlock").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		testenv.Missing(t, "python3-sanlock not installed")
	}
	const ls = "lsm"
	if err := c.InitLockspace("ls", ls, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"r1", "rex", "rsh", "ror"} {
		if err := c.InitResource(r, ls, r, 8); err != nil {
			t.Fatal(err)
		}
	}
	hosts := addHosts(t, c, "m", []harness.Kind{harness.Go, harness.C}, ls, "ls")
	ours, cHost := hosts[0], hosts[1]
	pidOf := func() int {
		b, _ := os.ReadFile(filepath.Join(ours.RunDir, "sanlock.pid"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	t.Cleanup(func() {
		if p := pidOf(); p > 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})

	// The python holder: EX on rex, SH on rsh.
	pycmd := exec.Command(py, "-c", fmt.Sprintf(`
import sanlock, sys
fd = sanlock.register()
sanlock.acquire(b%[1]q, b"rex", [(%[2]q, 0)], slkfd=fd)
sanlock.acquire(b%[1]q, b"rsh", [(%[3]q, 0)], slkfd=fd, shared=True)
print("inquire", sorted(str(x) for x in sanlock.inquire(slkfd=fd)), flush=True)
sys.stdin.readline()
print("inquire", sorted(str(x) for x in sanlock.inquire(slkfd=fd)), flush=True)
sys.stdin.readline()
`, ls, ours.Path("rex"), ours.Path("rsh")))
	pycmd.Env = ours.Env()
	pyIn, _ := pycmd.StdinPipe()
	pyOut, _ := pycmd.StdoutPipe()
	var pyErr strings.Builder
	pycmd.Stderr = &pyErr
	if err := pycmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pycmd.Process.Kill(); _ = pycmd.Wait() }()
	lines := bufio.NewScanner(pyOut)
	if !lines.Scan() {
		t.Fatalf("python holder: %s", pyErr.String())
	}
	before := lines.Text()

	// The orphan.
	gone, err := ours.Client().Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	orphan := ours.Resource(ls, "ror", "ror")
	orphan.Flags |= client.ResPersistent
	if err := gone.Acquire(context.Background(), []client.Resource{orphan}, 0, nil); err != nil {
		t.Fatal(err)
	}
	gone.Close()

	// Contention on r1 from both hosts.
	var logs []string
	var procs []*harness.Proc
	for _, h := range hosts {
		log := filepath.Join(h.Dir, "holder.log")
		p, _, err := h.StartProc("holder", holderBin, "-host", h.Name, "-ls", ls, "-res", "r1",
			"-path", h.Path("r1"), "-log", log, "-duration", "40s", "-shared", "0.3")
		if err != nil {
			t.Fatal(err)
		}
		logs, procs = append(logs, log), append(procs, p)
	}

	// The renewal history starts with the join's acquire, whose interval
	// to the first renewal is not a renewal interval: the acquire's short
	// wait (2 s at io_timeout 1), the add's completion and the loop's
	// half-second step, 4 s once under load (docs/delta.md "Completing
	// the add"). Wait for that first renewal, so that the history checked
	// below (gaps ending after t0) covers every renewal around a reexec
	// and no join.
	renewals := func() []uint64 {
		recs, err := ours.Client().Renewal(context.Background(), ls)
		if err != nil {
			t.Fatal(err)
		}
		var ts []uint64
		for _, r := range recs {
			var n uint64
			if _, err := fmt.Sscanf(r.Text, "timestamp=%d", &n); err == nil {
				ts = append(ts, n)
			}
		}
		return ts
	}
	var t0 uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ts := renewals(); len(ts) >= 2 {
			t0 = ts[len(ts)-1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal after the join: %v", renewals())
		}
	}

	for i := 0; i < 20; i++ {
		// A reexec that finds a command running past the quiesce timeout
		// fails (the daemon serves on): ask again.
		old := pidOf()
		deadline := time.Now().Add(60 * time.Second)
		for next := time.Now(); pidOf() == old; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("reexec %d: pid %d still serves", i, old)
			}
			if time.Now().After(next) {
				if err := syscall.Kill(old, syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				next = time.Now().Add(3 * time.Second)
			}
		}
		time.Sleep(time.Duration(300+(i%4)*400) * time.Millisecond)
	}
	for _, p := range procs {
		if err := p.Wait(60 * time.Second); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	hs, err := harness.ReadHoldings(logs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("r1: %s", harness.Summary(hs))
	// What the reexecs did with the commands in flight (docs/upgrade.md
	// "Pending requests"): for the record, not checked.
	if outs, _ := filepath.Glob(filepath.Join(ours.Dir, "daemon.*.log")); len(outs) > 0 {
		var all []byte
		for _, o := range outs {
			b, _ := os.ReadFile(o)
			all = append(all, b...)
		}
		t.Logf("our daemon: %d acquire(s) and %d convert(s) handed over, %d failed reexec(s)",
			bytes.Count(all, []byte("cmd_acquire cancelled for reexec")),
			bytes.Count(all, []byte("cmd_convert cancelled for reexec")),
			bytes.Count(all, []byte("reexec failed: ")))
	}
	for _, v := range harness.Check(hs) {
		t.Errorf("violation: %s", v)
	}
	if len(hs) == 0 {
		t.Error("no holdings of r1 recorded")
	}

	// The python holder: same leases, same lver, still registered.
	if _, err := pyIn.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("python holder: %s", pyErr.String())
	}
	if after := lines.Text(); after != before {
		t.Errorf("python holder: %s, before the reexecs %s", after, before)
	}
	recs, err := ours.Client().Status(context.Background(), client.StateClient)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		found = found || int(int32(r.Data32)) == pycmd.Process.Pid
	}
	if !found {
		t.Errorf("python holder pid %d not registered", pycmd.Process.Pid)
	}
	// The C host can take neither the EX lease nor the orphan.
	reg, err := cHost.Client().Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, r := range []string{"rex", "ror"} {
		if err := reg.Acquire(context.Background(), []client.Resource{cHost.Resource(ls, r, r)}, 0, nil); err == nil {
			t.Errorf("the C host acquired %s", r)
		}
	}

	// Renewal history since the reexecs began.
	ts := renewals()
	for i := 1; i < len(ts); i++ {
		if ts[i] <= t0 {
			continue
		}
		if d := ts[i] - ts[i-1]; d > 3 {
			t.Errorf("renewal gap %d s at %d: %v", d, ts[i-1], ts)
		}
	}
}
