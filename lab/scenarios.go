package main

import (
	"fmt"
	"strings"
	"time"
)

func scenarios() []scenario {
	singles := [][2]string{{"ours", "ours"}, {"5.1.1", "5.1.1"}, {"3.8.5", "3.8.5"}}
	return []scenario{
		{name: "reset-hung-holder", pairs: append(singles, [2]string{"ours", "5.1.1"}, [2]string{"ours", "3.8.5"}, [2]string{"3.8.5", "ours"}),
			run: resetHungHolder},
		// A holds, B and C contend: exactly one of them takes over.
		{name: "reset-hung-holder-3", pairs: [][2]string{{"ours", "ours"}, {"3.8.5", "3.8.5"}}, guests: 3, run: resetHungHolder},
		{name: "storage-back-within-grace", pairs: singles, run: storageBackWithinGrace},
		{name: "storage-eio", pairs: singles, pathFaults: true, run: storageEIO},
		{name: "storage-cut", pairs: singles, pathFaults: true, run: storageCut},
		{name: "storage-slow", pairs: singles, pathFaults: true, run: storageSlow},
		{name: "reset-daemon-killed", pairs: singles, run: resetDaemonKilled},
		{name: "reset-wdmd-killed", pairs: [][2]string{{"3.8.5", "3.8.5"}, {"ours", "ours"}}, run: resetWdmdKilled},
		{name: "hung-past-sigkill-back", pairs: singles, run: hungPastSigkillBack},
		{name: "hung-holder-back", pairs: [][2]string{{"ours", "ours"}}, run: hungHolderBack},
		{name: "daemon-user", pairs: [][2]string{{"ours", "5.1.1"}, {"ours", "3.9.5"}, {"ours", "3.8.5"}}, run: daemonUser},
		// lvm2 2.03.31 of the sid tree beside 5.1.1; ours runs there too.
		{name: "lvmlockd", pairs: [][2]string{{"5.1.1", "5.1.1"}, {"ours", "ours"}, {"ours", "5.1.1"}},
			oursTree: "sid", run: lvmlockdScenario},
		// lvm2 2.03.16 of the bookworm tree beside 3.8.5.
		{name: "lvmlockd-bookworm", pairs: [][2]string{{"3.8.5", "3.8.5"}, {"ours", "ours"}, {"ours", "3.8.5"}},
			run: lvmlockdScenario},
		{name: "reexec-holding", pairs: [][2]string{{"ours", "ours"}}, installed: true, run: reexecHolding},
		{name: "lvmlockd-reexec", pairs: [][2]string{{"ours", "ours"}}, oursTree: "sid", installed: true, run: lvmlockdReexec},
		cawScenario(),
	}
}

// shellScenario is the -shell mode: not part of the scenario list.
func shellScenario(pair [2]string) scenario {
	return cawShell(scenario{name: "shell", pairs: [][2]string{pair}, run: shell})
}

// resetHungHolder: A's storage hangs while its holder is in the kernel on
// it. The holder cannot be killed, so A's watchdog must reset A, and B
// may acquire only after that reset and after host_dead_seconds.
func resetHungHolder(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("hung", func() error {
		if err := e.a.hang(); err != nil {
			return err
		}
		probe, err := e.startProbe(e.a)
		if err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		st := e.holderState(e.a)
		e.tl.add("A", "holder state "+st)
		if st != "D" {
			return fmt.Errorf("A's holder is in state %q, not D, with its storage hung", st)
		}
		if done := probe(); done != "" {
			return fmt.Errorf("A: a read issued after the hang completed (%s)", done)
		}
		e.tl.add("A", "a read issued after the hang still waits")
		return nil
	})
}

// resetDaemonKilled: A's sanlock is killed with SIGKILL while A holds;
// wdmd stops petting, the watchdog resets A and B takes over after it.
func resetDaemonKilled(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("killed", func() error {
		out, rc, err := e.a.sh(10*time.Second, "kill -9 $(cat /run/lab-sanlock.pid)")
		if err != nil || rc != 0 {
			return fmt.Errorf("A: kill -9 sanlock (rc %d, %v): %s", rc, err, out)
		}
		e.tl.add("A", "sanlock killed -9")
		return nil
	})
}

// resetWdmdKilled: A's wdmd is killed with SIGKILL while A holds. The
// watchdog device stays armed with nobody petting it (no magic close), so
// it resets A, and B takes over after the reset.
func resetWdmdKilled(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("wdmd killed", func() error {
		out, rc, err := e.a.sh(10*time.Second, "kill -9 $(cat /run/lab-wdmd.pid)")
		if err != nil || rc != 0 {
			return fmt.Errorf("A: kill -9 wdmd (rc %d, %v): %s", rc, err, out)
		}
		e.tl.add("A", "wdmd killed -9")
		return nil
	})
}

// takeoverAfterReset applies fault to A and waits for A's watchdog reset
// and the acquisition by one of the other guests (B, or B or C, ...); it
// passes when A was reset (and no other guest was), exactly one other
// guest acquired, after the reset and no sooner than host_dead_seconds
// after A's last renewal landed on the disk (which may be a write QEMU
// completes at the reset), and the checker finds no violation.
func (e *env) takeoverAfterReset(what string, fault func() error) (bool, string) {
	renewal := e.watchRenewals(1)
	tFault := e.tl.add("A", "fault: "+what)
	if err := fault(); err != nil {
		renewal.stop()
		return false, err.Error()
	}
	contenders := e.gs[1:]
	acquired := func() []*guest {
		var got []*guest
		for _, g := range contenders {
			if strings.Contains(e.holderLog(g), " acquired lver ") {
				got = append(got, g)
			}
		}
		return got
	}
	limit := time.Duration(hostDead+120) * time.Second
	ok := waitFor(limit, func() bool { return len(acquired()) > 0 })
	tRenewal, ts := renewal.stop()
	if !ok {
		_, reset := e.qmpEvent(e.a, "WATCHDOG", tFault)
		return false, fmt.Sprintf("no other guest acquired within %v (A watchdog seen: %v)", limit, reset)
	}
	winner := acquired()[0]
	tAcq := e.tl.add(winner.name, "holder acquired")
	tDog, dogOK := e.qmpEvent(e.a, "WATCHDOG", tFault)
	_, resetOK := e.qmpEvent(e.a, "RESET", tFault)
	// The losers go on trying (one attempt every second or two).
	settle := 3 * time.Second
	if len(contenders) > 1 {
		settle = 15 * time.Second
	}
	refused := map[*guest]int{}
	for _, g := range contenders {
		refused[g] = e.refusals(g)
	}
	time.Sleep(settle)
	okCheck, checkDetail := e.check()
	var fails []string
	if !dogOK || !resetOK {
		fails = append(fails, "no watchdog reset of A")
	}
	for _, g := range contenders {
		if _, dog := e.qmpEvent(g, "WATCHDOG", e.tl.start); dog {
			fails = append(fails, g.name+"'s watchdog fired")
		}
	}
	if got := acquired(); len(got) != 1 {
		fails = append(fails, fmt.Sprintf("%d guests acquired", len(got)))
	}
	if dogOK && tAcq.Before(tDog) {
		fails = append(fails, winner.name+" acquired before A's reset")
	}
	// The winner counts host_dead_seconds from when it saw A's timestamp
	// change, which is after the change landed; the watcher sees it
	// within renewalPoll of landing.
	sinceRenewal := tAcq.Sub(tRenewal)
	if tRenewal.IsZero() || sinceRenewal < time.Duration(hostDead)*time.Second-2*renewalPoll {
		fails = append(fails, fmt.Sprintf("%s acquired %.1f s after A's last renewal (timestamp %d) landed, before host_dead_seconds",
			winner.name, sinceRenewal.Seconds(), ts))
	}
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	landed := "before"
	if tRenewal.After(tFault) {
		landed = fmt.Sprintf("%.1f s after", tRenewal.Sub(tFault).Seconds())
	}
	w := winner.name
	detail := fmt.Sprintf("fault→reset %.1f s, reset→%s acquired %.1f s, fault→%s acquired %.1f s, "+
		"A's last renewal (landed %s the fault)→%s acquired %.1f s",
		tDog.Sub(tFault).Seconds(), w, tAcq.Sub(tDog).Seconds(), w, tAcq.Sub(tFault).Seconds(),
		landed, w, sinceRenewal.Seconds())
	if !dogOK {
		detail = fmt.Sprintf("fault→%s acquired %.1f s", w, tAcq.Sub(tFault).Seconds())
	}
	for _, g := range contenders {
		if g != winner && len(contenders) > 1 {
			detail += fmt.Sprintf(", %s refused %d times in the %.0f s after", g.name, e.refusals(g)-refused[g], settle.Seconds())
		}
	}
	detail += "; " + checkDetail
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// storageBackWithinGrace: A's storage hangs for less than the renewal
// failure time, then comes back: no reset, A keeps its lease, B stays
// refused past host_dead_seconds.
func storageBackWithinGrace(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	tFault := e.tl.add("A", "fault: hung for 6 s")
	if err := e.a.hang(); err != nil {
		return false, err.Error()
	}
	time.Sleep(6 * time.Second)
	if err := e.a.unhang(); err != nil {
		return false, err.Error()
	}
	before := strings.Count(e.holderLog(e.a), " wrote lver ")
	waitFor(time.Duration(hostDead+10)*time.Second-time.Since(tFault), func() bool { return false })
	fails := e.resets()
	if strings.Contains(e.holderLog(e.b), " acquired lver ") {
		fails = append(fails, "B acquired the lease")
	}
	after := strings.Count(e.holderLog(e.a), " wrote lver ")
	if after-before < 30 {
		fails = append(fails, fmt.Sprintf("A's holder wrote %d tokens after its storage came back", after-before))
	}
	okCheck, checkDetail := e.check()
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	detail := fmt.Sprintf("no reset, A kept the lease (%d tokens since), B refused %d times; %s",
		after-before, e.refusals(e.b), checkDetail)
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// hungPastSigkillBack: without the watchdog (-w 0), A's storage hangs past
// the SIGKILL stage of the recovery and then comes back; A's holder
// ignores SIGTERM and does no I/O, so SIGKILL ends it while the storage
// still hangs. Ours writes A's delta lease released (timestamp 0) as soon
// as the storage is back, so B need not wait host_dead_seconds for it
// (docs/reliability.md "sanlock 3.8.5 and the release after a hang"). C
// sanlock writes that release only where its reads wait for the device;
// on a guest's virtio disk they are asynchronous, abandoned at their
// timeout, and it writes nothing: B must then wait host_dead_seconds
// from A's last renewal, which the scenario checks.
func hungPastSigkillBack(e *env) (bool, string) {
	return hungBack(e, "-ignore-term -no-token")
}

// hungHolderBack is hungPastSigkillBack with A's holder in the kernel on
// the hung storage (D state), so that it dies only when the storage is
// back.
func hungHolderBack(e *env) (bool, string) {
	return hungBack(e, "")
}

// hungBack runs the storage-hung-and-back case with A's holder started
// with holderArgs. It passes when no guest was reset, the checker finds
// no violation, B acquires within 30 s of the storage's return, and
// either A's delta lease was released (required of ours) or B acquired no
// sooner than host_dead_seconds after A's last renewal landed.
func hungBack(e *env, holderArgs string) (bool, string) {
	if err := e.holdAndContend(false, holderArgs); err != nil {
		return false, err.Error()
	}
	renewal := e.watchRenewals(1)
	hang := 62 * time.Second
	e.tl.add("A", fmt.Sprintf("fault: hung for %v", hang))
	if err := e.a.hang(); err != nil {
		renewal.stop()
		return false, err.Error()
	}
	waitFor(hang, func() bool { return false })
	tBack := time.Now()
	if err := e.a.unhang(); err != nil {
		renewal.stop()
		return false, err.Error()
	}
	var ts uint64
	released := waitFor(15*time.Second, func() bool {
		t, err := e.deltaTimestamp(1)
		ts = t
		return err == nil && t == 0
	})
	if released {
		e.tl.add("A", "delta lease released (timestamp 0)")
	}
	tAcq, acq := e.waitAcquired(e.b, 30*time.Second)
	tRenewal, _ := renewal.stop()
	time.Sleep(3 * time.Second)
	fails, checkDetail := e.noResetAndCheck()
	what := "A's delta lease released when its storage came back"
	if !released {
		what = fmt.Sprintf("A's delta lease kept timestamp %d 15 s after its storage came back", ts)
		if e.da.label == "ours" {
			fails = append(fails, "ours did not release A's delta lease")
		}
	}
	acqText := "B did not acquire within 45 s of the storage's return"
	if acq {
		acqText = fmt.Sprintf("B acquired %.1f s after the storage's return", tAcq.Sub(tBack).Seconds())
		if !released {
			since := tAcq.Sub(tRenewal)
			acqText += fmt.Sprintf(", %.1f s after A's last renewal landed", since.Seconds())
			if tRenewal.IsZero() || since < time.Duration(hostDead)*time.Second-2*renewalPoll {
				fails = append(fails, "B acquired before host_dead_seconds from A's last renewal")
			}
		}
	} else {
		fails = append(fails, acqText)
	}
	detail := fmt.Sprintf("%s; %s; %s", what, acqText, checkDetail)
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// rootByDefault lists the daemons that stay root when started without
// -U/-G. Ours, 3.8.5 and 3.9.5 drop to the user sanlock (and its groups).
var rootByDefault = map[string]bool{"5.1.1": true}

// daemonUser starts sanlock without -U and -G on both guests and compares
// the user and the groups of every thread it runs with: the other
// scenarios give every daemon "-U root -G root", so that they compare the
// daemons on equal terms. Beside a daemon that stays root by default, ours
// is first checked to drop to sanlock as 3.8.5 and 3.9.5 do, then
// restarted with "uname = root" and "gname = root" in
// /etc/sanlock/sanlock.conf, the setting docs/cli.md gives for 5.1.1's
// default, and must then run as that daemon does.
func daemonUser(e *env) (bool, string) {
	e.userOpts = ""
	ids := map[string]string{}
	for _, g := range []*guest{e.a, e.b} {
		if err := e.startDaemons(g, true); err != nil {
			return false, err.Error()
		}
		id, err := e.daemonIDs(g)
		if err != nil {
			return false, err.Error()
		}
		ids[g.name] = id
	}
	detail := fmt.Sprintf("A (%s): %s; B (%s): %s", e.da.label, ids["A"], e.db.label, ids["B"])
	if e.da.label != "ours" || !rootByDefault[e.db.label] {
		return ids["A"] == ids["B"], detail
	}
	if !strings.HasPrefix(ids["A"], "Uid: 100 ") {
		return false, "ours without -U does not run as sanlock: " + detail
	}
	conf := "kill $(cat /run/lab-sanlock.pid); while kill -0 $(cat /run/lab-sanlock.pid) 2>/dev/null; do sleep 0.2; done; " +
		"mkdir -p /etc/sanlock && printf 'uname = root\\ngname = root\\n' >/etc/sanlock/sanlock.conf"
	if out, rc, err := e.a.sh(30*time.Second, conf); err != nil || rc != 0 {
		return false, fmt.Sprintf("A: restart with uname/gname root (rc %d, %v): %s", rc, err, out)
	}
	// wdmd is still running from the first start: sanlock alone (-w 0).
	if err := e.startDaemons(e.a, false); err != nil {
		return false, err.Error()
	}
	id, err := e.daemonIDs(e.a)
	if err != nil {
		return false, err.Error()
	}
	detail += fmt.Sprintf("; A (ours, uname/gname root in sanlock.conf): %s", id)
	// 3.8.5 run with -U root -G root has supplementary group 0, as ours
	// has; 5.1.1, which never changes its user, has none. The primary
	// group gives the same access, so it is left out of the comparison.
	norm := func(s string) string { return strings.ReplaceAll(s, "Groups: 0 ;", "Groups: ;") }
	return norm(id) == norm(ids["B"]), detail
}

// daemonIDs returns the uid of g's sanlock daemon, then the distinct
// supplementary groups of its threads: the kernel keeps both per thread.
func (e *env) daemonIDs(g *guest) (string, error) {
	out, _, err := g.sh(5*time.Second, "p=$(cat /run/lab-sanlock.pid); grep '^Uid' /proc/$p/status | tr -s '\\t' ' '; "+
		"for t in /proc/$p/task/*; do grep '^Groups' $t/status; done | tr -s '\\t' ' ' | sort -u | tr '\\n' ';'")
	return strings.TrimSpace(out), err
}
