package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// reexecState is what the reexec scenarios compare on A before and after
// the live upgrade of its daemon.
type reexecState struct {
	pid    string // the daemon's pid (its pid file)
	status string // "client status"
	wdmd   string // our wdmd's dump line of the lockspace's session
}

// wdmdSession matches the dump line (wdmd -d) of a lockspace's session
// and takes its dead flag and last renewal.
var wdmdSession = regexp.MustCompile(`name sanlock_(\S+) pid \d+ fd \d+ dead (\d) ref \d+ now \d+ renewal (\d+)`)

// daemonState reads reexecState on g, whose wdmd session is that of
// lockspace ls (host_id included, "lab:1").
func (e *env) daemonState(g *guest, ls string) reexecState {
	d := e.daemonOf(g)
	var st reexecState
	out, _, _ := g.sh(10*time.Second, "cat /run/sanlock/sanlock.pid")
	st.pid = strings.TrimSpace(out)
	out, _, _ = g.sh(10*time.Second, d.sanlock+" client status")
	st.status = strings.TrimSpace(out)
	out, _, _ = g.sh(10*time.Second, d.wdmd+" -d")
	for _, l := range strings.Split(out, "\n") {
		if m := wdmdSession.FindStringSubmatch(l); m != nil && m[1] == ls {
			st.wdmd = strings.TrimSpace(l)
		}
	}
	return st
}

// wdmdRenewal returns the dead flag and the last renewal of a dump line.
func wdmdRenewal(line string) (dead bool, renewal int64) {
	m := wdmdSession.FindStringSubmatch(line)
	if m == nil {
		return true, 0
	}
	renewal, _ = strconv.ParseInt(m[3], 10, 64)
	return m[2] != "0", renewal
}

// installedSanlock is where our sanlock runs from in the scenarios that
// install it (scenario.installed), as the package installs it.
const installedSanlock = "/usr/sbin/sanlock"

// nextBuild is the build a live upgrade installs over installedSanlock:
// the same source built as the packages build it (-trimpath, -s -w), so
// that the new image is another file with other bytes.
const nextBuild = "/lab/bin/lab-sanlock-next"

// reexec runs our live upgrade on g ("client reexec": the daemon hands
// over to a new image of its binary) and checks that it completed: the
// command answered 0, the pid file names a new pid, the old image has
// exited and the daemon's log has the new image's "took over from pid".
// When our sanlock was installed (scenario.installed), nextBuild is
// first installed over it, as an upgrade does (a new file replaces the
// old name), and the new image must be that build.
func (e *env) reexec(g *guest, before reexecState) (string, error) {
	d := e.daemonOf(g)
	if d.label != "ours" {
		return "", fmt.Errorf("%s runs %s: only ours has client reexec", g.name, d.label)
	}
	upgrade := d.sanlock == installedSanlock
	if upgrade {
		cmd := fmt.Sprintf("! cmp -s %[1]s %[2]s && install -m 0755 %[1]s %[2]s && cmp -s /proc/%[3]s/exe /lab/bin/sanlock", nextBuild, installedSanlock, before.pid)
		if out, rc, err := g.sh(20*time.Second, cmd); err != nil || rc != 0 {
			return "", fmt.Errorf("%s: installing %s over %s while pid %s runs the first build (rc %d, %v): %s",
				g.name, nextBuild, installedSanlock, before.pid, rc, err, out)
		}
		g.tl.add(g.name, "installed "+nextBuild+" as "+installedSanlock)
	}
	t0 := time.Now()
	out, rc, err := g.sh(60*time.Second, d.sanlock+" client reexec")
	took := time.Since(t0)
	g.tl.add(g.name, fmt.Sprintf("client reexec: rc %d in %.2f s", rc, took.Seconds()))
	if err != nil || rc != 0 || !strings.Contains(out, "reexec done 0") {
		return "", fmt.Errorf("%s: client reexec (rc %d, %v): %s", g.name, rc, err, lastLines(out, 3))
	}
	var newPid string
	waitFor(10*time.Second, func() bool {
		o, _, _ := g.sh(5*time.Second, "cat /run/sanlock/sanlock.pid")
		newPid = strings.TrimSpace(o)
		return newPid != "" && newPid != before.pid
	})
	if newPid == before.pid {
		return "", fmt.Errorf("%s: the pid file still names %s after the reexec", g.name, before.pid)
	}
	check := fmt.Sprintf("test ! -e /proc/%s && test -e /proc/%s && grep -h 'took over from pid %s' /var/log/sanlock.log /var/log/sanlock.stderr 2>/dev/null | tail -1",
		before.pid, newPid, before.pid)
	out, rc, err = g.sh(10*time.Second, check)
	if err != nil || rc != 0 || strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("%s: after the reexec the old image %s is still there, new image %s is gone, or no \"took over from pid %s\" in the log (rc %d, %v)",
			g.name, before.pid, newPid, before.pid, rc, err)
	}
	g.tl.add(g.name, fmt.Sprintf("daemon pid %s took over from pid %s", newPid, before.pid))
	what := fmt.Sprintf("reexec %.2f s, pid %s→%s", took.Seconds(), before.pid, newPid)
	if upgrade {
		if out, rc, err := g.sh(10*time.Second, fmt.Sprintf("cmp /proc/%s/exe %s", newPid, nextBuild)); err != nil || rc != 0 {
			return "", fmt.Errorf("%s: the new image %s is not %s (rc %d, %v): %s", g.name, newPid, nextBuild, rc, err, out)
		}
		g.tl.add(g.name, fmt.Sprintf("daemon pid %s runs %s", newPid, nextBuild))
		what += " (upgraded to another build)"
	}
	return what, nil
}

// reexecHolding: A (ours, with wdmd) holds the resource through a holder
// started by "client command" and writing tokens, B is refused; A's daemon
// is live-upgraded. The holder keeps its lease and goes on writing, wdmd
// keeps being petted (no reset for host_dead_seconds after the reexec), B
// stays refused, and A's status still shows the lockspace and the lease.
func reexecHolding(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	holderPid, _, _ := e.a.sh(5*time.Second, "cat /run/lab-holder.pid")
	holderPid = strings.TrimSpace(holderPid)
	// A few tokens before the reexec.
	time.Sleep(5 * time.Second)
	before := e.daemonState(e.a, lockspace+":1")
	tokBefore := strings.Count(e.holderLog(e.a), " wrote lver ")
	refBefore := e.refusals(e.b)
	tRe := time.Now()
	what, err := e.reexec(e.a, before)
	if err != nil {
		return false, err.Error()
	}
	// Past host_dead_seconds after the reexec: a watchdog no longer petted
	// would have fired (60 s), and B would have taken over.
	waitFor(time.Duration(hostDead+4)*time.Second, func() bool {
		return strings.Contains(e.holderLog(e.b), " acquired lver ")
	})
	after := e.daemonState(e.a, lockspace+":1")
	tokAfter := strings.Count(e.holderLog(e.a), " wrote lver ")
	fails := e.resets()
	if strings.Contains(e.holderLog(e.b), " acquired lver ") {
		fails = append(fails, "B acquired the lease")
	}
	if _, rc, _ := e.a.sh(5*time.Second, "test -e /proc/"+holderPid); rc != 0 || holderPid == "" {
		fails = append(fails, "A's holder "+holderPid+" is gone")
	}
	if n := strings.Count(e.holderLog(e.a), " acquired lver "); n != 1 {
		fails = append(fails, fmt.Sprintf("A's holder acquired %d times", n))
	}
	// One token a second: host_dead_seconds after the reexec, at least
	// half of them (TCG is slow).
	if tokAfter-tokBefore < hostDead/2 {
		fails = append(fails, fmt.Sprintf("A's holder wrote %d tokens in the %d s after the reexec", tokAfter-tokBefore, hostDead))
	}
	if e.refusals(e.b) <= refBefore {
		fails = append(fails, "B made no attempt after the reexec")
	}
	sLine := fmt.Sprintf("s %s:1:/dev/vda:0", lockspace)
	rLine := fmt.Sprintf("r %s:R1:/dev/vda:%d:", lockspace, resOffset)
	for _, st := range []struct {
		when string
		s    reexecState
	}{{"before", before}, {"after", after}} {
		if !strings.Contains(st.s.status, sLine) || !strings.Contains(st.s.status, rLine) || !strings.Contains(st.s.status, " p "+holderPid) {
			fails = append(fails, fmt.Sprintf("client status %s the reexec lacks the lockspace or the lease of pid %s: %q", st.when, holderPid, st.s.status))
		}
	}
	leaseOf := func(status string) string {
		for _, l := range strings.Split(status, "\n") {
			if strings.HasPrefix(l, rLine) {
				return strings.TrimSpace(l)
			}
		}
		return ""
	}
	if leaseOf(before.status) != leaseOf(after.status) {
		fails = append(fails, fmt.Sprintf("lease %q before the reexec, %q after", leaseOf(before.status), leaseOf(after.status)))
	}
	deadB, renB := wdmdRenewal(before.wdmd)
	deadA, renA := wdmdRenewal(after.wdmd)
	if before.wdmd == "" || after.wdmd == "" || deadB || deadA || renA <= renB {
		fails = append(fails, fmt.Sprintf("wdmd's session: %q before, %q after", before.wdmd, after.wdmd))
	}
	okCheck, checkDetail := e.check()
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	detail := fmt.Sprintf("%s; %.0f s after it: no reset, holder %s wrote %d tokens since, lease %q kept, wdmd session renewed %d→%d, B refused %d times since; %s",
		what, time.Since(tRe).Seconds(), holderPid, tokAfter-tokBefore, leaseOf(after.status), renB, renA,
		e.refusals(e.b)-refBefore, checkDetail)
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// lvmReexecBefore are the lvm steps of lvmlockd-reexec before A's daemon
// is live-upgraded: a shared VG, its lockspace started on both hosts, an
// LV active exclusively on A.
var lvmReexecBefore = []lvmStep{
	{"A", "vgcreate --shared vg1 /dev/vda", must},
	{"B", "vgchange --lock-start vg1 || { dmsetup mknodes; vgchange --lock-start vg1; }", must},
	{"A", "lvcreate -an -L 8M -n lv1 vg1", must},
	{"A", "lvchange -aey vg1/lv1", must},
}

// lvmReexecAfter are the steps after it: the LV's lock still refuses B
// until A deactivates it.
var lvmReexecAfter = []lvmStep{
	{"B", "lvchange -aey vg1/lv1", mustNot},
	{"A", "lvchange -an vg1/lv1", must},
	{"B", "lvchange -aey vg1/lv1", must},
	{"B", "lvchange -an vg1/lv1", must},
}

// lvLocks returns the lines of "lvmlockctl -i" on g that name an LV lock.
func lvLocks(g *guest) string {
	out, _, _ := g.sh(20*time.Second, "lvmlockctl -i")
	var l []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "LK" && f[1] == "LV" {
			l = append(l, strings.Join(f, " "))
		}
	}
	return strings.Join(l, "; ")
}

// lvmlockdReexec: lvmlockd on both guests with a shared VG and an LV
// active exclusively on A; A's daemon (ours) is live-upgraded. lvmlockd's
// registered connection and its leases move to the new image: A's
// lvmlockctl still shows the LV lock, B's exclusive activation is still
// refused, then A's deactivation and B's activation work, and neither
// guest is reset up to host_dead_seconds after the reexec.
func lvmlockdReexec(e *env) (bool, string) {
	if err := e.startLvmlockd(); err != nil {
		return false, err.Error()
	}
	if _, unexpected := e.lvmRun(lvmReexecBefore); len(unexpected) > 0 {
		return false, "before the reexec: " + strings.Join(unexpected, "; ")
	}
	locksBefore := lvLocks(e.a)
	before := e.daemonState(e.a, "")
	tRe := time.Now()
	what, err := e.reexec(e.a, before)
	if err != nil {
		return false, err.Error()
	}
	var fails []string
	locksAfter := lvLocks(e.a)
	e.a.tl.add("A", "lvmlockctl -i LV locks: "+locksAfter)
	if locksAfter == "" || locksAfter != locksBefore || !strings.Contains(locksAfter, " ex") {
		fails = append(fails, fmt.Sprintf("A's LV locks %q before the reexec, %q after", locksBefore, locksAfter))
	}
	after := e.daemonState(e.a, "")
	if !strings.Contains(after.status, "s lvm_vg1:1:") || strings.Count(after.status, "\nr ") < strings.Count(before.status, "\nr ") {
		fails = append(fails, fmt.Sprintf("client status after the reexec lacks the VG's lockspace or leases: %q (before: %q)", after.status, before.status))
	}
	_, unexpected := e.lvmRun(lvmReexecAfter)
	fails = append(fails, unexpected...)
	waitFor(time.Duration(hostDead+4)*time.Second-time.Since(tRe), func() bool { return false })
	fails = append(fails, e.resets()...)
	detail := fmt.Sprintf("%s; LV lock on A after it %q; B's -aey refused, A's -an then B's -aey done; no reset %.0f s after the reexec",
		what, locksAfter, time.Since(tRe).Seconds())
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}
