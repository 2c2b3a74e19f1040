package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLocksCluster: a two-host cluster on one lease file, host 1 the C
// sanlock 3.8.5 daemon and host 2 ours. Host 1 holds R1 exclusively, both
// hold R2 shared, R3 is free. `client locks` and every --json action run
// against each daemon (everything they show comes from the wire and the
// disk, which both daemons answer the same way); each JSON output is checked
// against docs/schema and decoded into the documented types.
func TestLocksCluster(t *testing.T) {
	needC(t)
	leases := filepath.Join(leaseDir(t), "leases")
	if err := os.WriteFile(leases, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(leases, 8<<20); err != nil {
		t.Fatal(err)
	}
	res := func(name string, mib int) string { return fmt.Sprintf("LS:%s:%s:%dM", name, leases, mib) }
	for _, a := range [][]string{
		{"direct", "init", "-s", "LS:0:" + leases + ":0", "-o", "1"},
		{"direct", "init", "-r", res("R1", 1)},
		{"direct", "init", "-r", res("R2", 2)},
		{"direct", "init", "-r", res("R3", 3)},
	} {
		if out, rc := runC(t, a...); rc != 0 {
			t.Fatalf("%v: %s", a, out)
		}
	}
	dirs := map[int]string{
		1: startClusterDaemon(t, cSanlock),
		2: startClusterDaemon(t, os.Args[0], "-e", "hostB"),
	}
	// Both join with io_timeout 1 (passed to add_lockspace: the C daemon
	// ignores daemon -o), at the same time.
	var wg sync.WaitGroup
	for id, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, rc := runIn(t, dir, cSanlock, "client", "add_lockspace", "-o", "1", "-s", fmt.Sprintf("LS:%d:%s:0", id, leases))
			if rc != 0 {
				t.Errorf("host %d add_lockspace: %s", id, out)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Leases: R1 EX and R2 SH on host 1, then R2 SH on host 2.
	pids := map[string]int{}
	pids["A1"] = holdLease(t, dirs[1], cSanlock, "LS:R1", res("R1", 1))
	pids["A2"] = holdLease(t, dirs[1], cSanlock, "LS:R2", res("R2", 2)+":SH")
	pids["B2"] = holdLease(t, dirs[2], os.Args[0], "LS:R2", res("R2", 2)+":SH")

	// Each daemon must see the other host live.
	for id, dir := range dirs {
		waitFor(t, fmt.Sprintf("host %d sees both hosts LIVE", id), func() bool {
			out, _ := runIn(t, dir, os.Args[0], "client", "gets", "-h", "1")
			return strings.Count(out, " LIVE") == 2
		})
	}
	names := map[int]string{}
	for id, dir := range dirs {
		out, rc := runIn(t, dir, os.Args[0], "client", "status", "--json")
		if rc != 0 {
			t.Fatalf("status --json rc %d: %s", rc, out)
		}
		s := checkJSON(t, "status", out).(*StatusJSON)
		names[id] = s.Daemon.HostName
	}
	if names[2] != "hostB" || names[1] == "" {
		t.Fatalf("daemon names %v", names)
	}

	for id, dir := range dirs {
		t.Run(fmt.Sprintf("host%d", id), func(t *testing.T) {
			out, rc := runIn(t, dir, os.Args[0], "client", "locks", "--json", "-r", res("R3", 3), "-r", res("R1", 1))
			if rc != 0 {
				t.Fatalf("locks --json rc %d: %s", rc, out)
			}
			l := checkJSON(t, "locks", out).(*LocksJSON)
			if l.HostName != names[id] || len(l.Lockspaces) != 1 {
				t.Fatalf("locks: %s", out)
			}
			ls := l.Lockspaces[0]
			if ls.Name != "LS" || ls.HostID != uint64(id) || ls.Path != leases || ls.HostsResult != 0 || len(ls.Hosts) != 2 {
				t.Errorf("lockspace: %+v", ls)
			}
			if l.Monotime == 0 || ls.State != "JOINED" || ls.RenewalLastResult != 1 {
				t.Errorf("locks: monotime %d, lockspace %+v", l.Monotime, ls)
			}
			for _, h := range ls.Hosts {
				if h.Name != names[int(h.HostID)] || h.State != "LIVE" || h.Generation == 0 || h.Local != (h.HostID == uint64(id)) {
					t.Errorf("host: %+v (names %v)", h, names)
				}
				// Both hosts renew every 2 s (io_timeout 1), and each
				// daemon has seen both renew: the ages are small.
				if h.RenewedAgo == nil || *h.RenewedAgo > 10 || h.DeadFor != nil {
					t.Errorf("host %d ages: %+v", h.HostID, h)
				}
			}
			got := map[string]LocksResource{}
			for _, r := range l.Resources {
				got[r.Name] = r
			}
			if len(got) != len(l.Resources) {
				t.Errorf("a resource listed twice: %s", out)
			}
			// R1: EX on host 1, with its sleep there.
			r1 := got["R1"]
			if r1.Mode != "EX" || r1.ReadResult != 0 || r1.Lver == 0 || len(r1.Owners) != 1 ||
				r1.Owners[0] != (LocksOwner{HostID: 1, Name: names[1], Generation: 1, Mode: "EX", Local: id == 1}) {
				t.Errorf("R1: %+v", r1)
			}
			wantLocal := func(r LocksResource, pid int, mode string) {
				t.Helper()
				if pid == 0 {
					if len(r.Local) != 0 {
						t.Errorf("%s local: %+v", r.Name, r.Local)
					}
					return
				}
				if len(r.Local) != 1 || r.Local[0].Pid != int32(pid) || r.Local[0].Command != "sleep" ||
					r.Local[0].Mode != mode || r.Local[0].List != "held" {
					t.Errorf("%s local: %+v, want pid %d sleep %s", r.Name, r.Local, pid, mode)
				}
			}
			// R2: shared by both hosts.
			r2 := got["R2"]
			var sh []string
			for _, o := range r2.Owners {
				sh = append(sh, fmt.Sprintf("%d %s %s %v", o.HostID, o.Name, o.Mode, o.Local))
			}
			sort.Strings(sh)
			want := []string{
				fmt.Sprintf("1 %s SH %v", names[1], id == 1),
				fmt.Sprintf("2 %s SH %v", names[2], id == 2),
			}
			if r2.Mode != "SH" || strings.Join(sh, ",") != strings.Join(want, ",") {
				t.Errorf("R2: %+v, owners %v want %v", r2, sh, want)
			}
			r3 := got["R3"]
			if r3.Mode != "FREE" || len(r3.Owners) != 0 || len(r3.Local) != 0 || r3.ReadResult != 0 {
				t.Errorf("R3: %+v", r3)
			}
			if id == 1 {
				wantLocal(r1, pids["A1"], "EX")
				wantLocal(r2, pids["A2"], "SH")
			} else {
				wantLocal(r1, 0, "")
				wantLocal(r2, pids["B2"], "SH")
			}

			// The text table carries the same rows.
			out, rc = runIn(t, dir, os.Args[0], "client", "locks", "-r", res("R1", 1))
			if rc != 0 || !strings.HasPrefix(out, "LOCKSPACE  HOST_ID  HOST_NAME") ||
				!strings.Contains(out, "\nLOCKSPACE  RESOURCE  MODE  LVER  HOST_ID  HOST_NAME") {
				t.Errorf("locks rc %d:\n%s", rc, out)
			}
			r1row := fmt.Sprintf(`(?m)^LS +R1 +EX +%d +1 +%s +- +-$`, r1.Lver, regexp.QuoteMeta(names[1]))
			if id == 1 {
				r1row = fmt.Sprintf(`(?m)^LS +R1 +EX +%d +1\* +%s +%d +sleep$`, r1.Lver, regexp.QuoteMeta(names[1]), pids["A1"])
			}
			if !regexp.MustCompile(r1row).MatchString(out) {
				t.Errorf("locks text: no %q in\n%s", r1row, out)
			}

			// -s limits the report to one lockspace; an unknown one fails.
			out, rc = runIn(t, dir, os.Args[0], "client", "locks", "--json", "-s", "NOPE")
			if l := checkJSON(t, "locks", out).(*LocksJSON); rc != 1 || l.Result != -2 {
				t.Errorf("locks -s NOPE: rc %d %s", rc, out)
			}
			out, rc = runIn(t, dir, os.Args[0], "client", "locks", "--json", "-s", "LS")
			if l := checkJSON(t, "locks", out).(*LocksJSON); rc != 0 || len(l.Lockspaces) != 1 || len(l.Resources) != 2-id+1 {
				t.Errorf("locks -s LS: rc %d %s", rc, out)
			}

			// The other --json actions, each checked against its schema.
			holder := pids["B2"]
			if id == 1 {
				holder = pids["A1"]
			}
			for _, c := range []struct {
				args []string
				rc   int
				ok   func(any) bool
			}{
				{[]string{"gets", "-h", "1"}, 0, func(v any) bool {
					g := v.(*GetsJSON)
					for _, h := range g.Lockspaces[0].Hosts {
						if h.RenewedAgo == nil || *h.RenewedAgo > 10 {
							return false
						}
					}
					return len(g.Lockspaces) == 1 && len(g.Lockspaces[0].Hosts) == 2 && g.Lockspaces[0].HostID == uint64(id) &&
						g.Monotime != 0
				}},
				{[]string{"gets"}, 0, func(v any) bool { return v.(*GetsJSON).Lockspaces[0].Hosts == nil }},
				{[]string{"host_status"}, 0, func(v any) bool {
					h := v.(*HostStatusJSON)
					return len(h.Lockspaces) == 1 && len(h.Lockspaces[0].Hosts) >= 2
				}},
				{[]string{"host_status", "-s", "LS", "-D"}, 0, func(v any) bool {
					for _, h := range v.(*HostStatusJSON).Lockspaces[0].Hosts {
						if h.HostID == 2 && h.OwnerName == "hostB" && h.Keys["owner_name"] == "hostB" && h.IOTimeout == 1 {
							return true
						}
					}
					return false
				}},
				{[]string{"host_status", "-s", "NOPE"}, 1, func(v any) bool { return v.(*HostStatusJSON).Result == -28 }},
				{[]string{"renewal", "-s", "LS"}, 0, func(v any) bool {
					r := v.(*RenewalJSON)
					return r.Lockspace == "LS" && len(r.Renewals) > 0 && r.Renewals[0].Timestamp > 0
				}},
				{[]string{"renewal"}, 1, func(v any) bool { return v.(*RenewalJSON).Result == -22 }},
				{[]string{"inquire", "-p", fmt.Sprint(holder)}, 0, func(v any) bool {
					q := v.(*InquireJSON)
					return q.ResCount == 1 && len(q.Resources) == 1 && q.Resources[0].Disks[0].Path == leases
				}},
				{[]string{"inquire", "-p", "1"}, 1, func(v any) bool { return v.(*InquireJSON).Result < 0 }},
				{[]string{"status", "-D", "-o", "p"}, 0, func(v any) bool {
					s := v.(*StatusJSON)
					return len(s.Lockspaces) == 1 && s.Lockspaces[0].List == "spaces" && len(s.Resources) == 2-id+1
				}},
			} {
				args := append([]string{"client"}, c.args...)
				out, rc := runIn(t, dir, os.Args[0], append(args, "--json")...)
				v := checkJSON(t, c.args[0], out)
				if rc != c.rc || !c.ok(v) {
					t.Errorf("%v --json: rc %d\n%s", c.args, rc, out)
				}
			}
		})
	}

	// Without a daemon every --json action prints its failure object.
	empty := t.TempDir()
	for action := range jsonTypes {
		out, rc := runIn(t, empty, os.Args[0], "client", action, "-s", "LS", "-p", "1", "--json")
		if v := checkJSON(t, action, out); rc != 1 || headOf(v).Result >= 0 {
			t.Errorf("%s --json without a daemon: rc %d %s", action, rc, out)
		}
	}
}

// headOf returns the head of a decoded --json output.
func headOf(v any) JSONHead {
	switch x := v.(type) {
	case *StatusJSON:
		return x.JSONHead
	case *GetsJSON:
		return x.JSONHead
	case *HostStatusJSON:
		return x.JSONHead
	case *RenewalJSON:
		return x.JSONHead
	case *InquireJSON:
		return x.JSONHead
	case *LocksJSON:
		return x.JSONHead
	}
	return JSONHead{}
}

// TestJSONOptionScope: --json is an option only for the status-like client
// actions; everywhere else the words stay what sanlock 3.8.5 makes of them.
func TestJSONOptionScope(t *testing.T) {
	needC(t)
	t.Setenv("SANLOCK_RUN_DIR", t.TempDir())
	for _, a := range [][]string{
		{"client", "version", "--json"}, {"client", "add_lockspace", "--json"}, {"client", "read", "--json"},
		{"direct", "dump", "/x", "--json"}, {"client", "log_dump", "--json"},
	} {
		same(t, a...)
	}
}

// startClusterDaemon starts bin as a daemon (the test binary acts as ours)
// in its own run dir, logging to stderr only, and stops it by pid.
func startClusterDaemon(t *testing.T, bin string, extra ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "gsl-locks-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := append([]string{"daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+dir,
		asSanlockEV+"=1", EnvConfigFile+"=/nonexistent/sanlock.conf")
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	waitFor(t, bin+" daemon start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "sanlock.sock"))
		return err == nil
	})
	return dir
}

// runIn runs a tool (the C one or the test binary as ours) against the
// daemon of runDir.
func runIn(t *testing.T, runDir, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, asSanlockEV+"=1", EnvConfigFile+"=/nonexistent/sanlock.conf")
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

// holdLease runs `client command -r RESOURCE -c /bin/sleep` with bin
// against runDir and waits until the daemon lists the lease; it returns
// the sleep's pid (the tool execs it) and kills it at cleanup.
func holdLease(t *testing.T, runDir, bin, name, resource string) int {
	t.Helper()
	cmd := exec.Command(bin, "client", "command", "-r", resource, "-c", "/bin/sleep", "300")
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, asSanlockEV+"=1", EnvConfigFile+"=/nonexistent/sanlock.conf")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	pid := cmd.Process.Pid
	waitFor(t, fmt.Sprintf("%s held by pid %d", resource, pid), func() bool {
		select {
		case <-done:
			t.Fatalf("command for %s exited: %s", resource, out.String())
		default:
		}
		st, _ := runIn(t, runDir, os.Args[0], "client", "status")
		return strings.Contains(st, "\nr "+name+":") && strings.Contains(st, fmt.Sprintf(" p %d\n", pid))
	})
	return pid
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
