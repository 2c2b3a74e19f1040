package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

// Faults on guest A's path that QEMU's throttle cannot make: A's drive is
// a file of a fusefault mount (scenario.pathFaults), which fails every
// request with EIO or delays it, while B reaches the same bytes directly.

// slowDelay is how long each request on A's slow path waits: half the
// io_timeout, so that a renewal read (the 1 MiB area, several FUSE requests
// served at once) still ends within it on a TCG guest.
const slowDelay = ioTimeout * time.Second / 2

// pathFault switches A's path to f and records it.
func (e *env) pathFault(f fusefault.Fault) time.Time {
	e.fuse.SetFault(f)
	return e.tl.add("A", "path fault: "+f.String())
}

// holderGone reports whether g's holder process has ended.
func (e *env) holderGone(g *guest) bool {
	_, rc, err := g.sh(5*time.Second, "kill -0 $(cat /run/lab-holder.pid) 2>/dev/null")
	return err == nil && rc != 0
}

// storageEIO: every request on A's path fails with EIO while A's holder
// (which does no I/O after acquiring, so it can be ended by a signal)
// holds the lease. A's renewals fail at once; after the failed-renewal
// time A's daemon ends the holder with SIGTERM; with no holder left no
// watchdog fires. B may take the lease only after A's holder is gone and
// host_dead_seconds after A's last renewal: A cannot write its release.
func storageEIO(e *env) (bool, string) { return pathLost(e, 0) }

// cutHang is how long A's cut path holds every request before failing
// them: a pulled cable is silent until the SCSI command timer (30 s by
// default) ends the requests in flight with an error.
const cutHang = 30 * time.Second

// storageCut: A's path is cut. Every request hangs for cutHang, then
// every request, those held included, fails with EIO. The holder is ended
// during the hang (SIGTERM after the failed-renewal time); then as
// storageEIO: no reset, and nothing A wrote before the cut lands after
// it.
func storageCut(e *env) (bool, string) { return pathLost(e, cutHang) }

// pathLost runs storageEIO, after hang of requests held first when hang
// is not 0.
func pathLost(e *env, hang time.Duration) (bool, string) {
	if err := e.holdAndContend(true, "-no-token"); err != nil {
		return false, err.Error()
	}
	renewal := e.watchRenewals(1)
	var tFault time.Time
	if hang > 0 {
		tFault = e.pathFault(fusefault.Fault{Mode: fusefault.Hang})
	}
	var tGone time.Time
	gone := func() bool {
		if tGone.IsZero() && e.holderGone(e.a) {
			tGone = e.tl.add("A", "holder gone")
		}
		return !tGone.IsZero()
	}
	if hang > 0 {
		waitFor(hang, func() bool { gone(); return false })
		e.pathFault(fusefault.Fault{Mode: fusefault.Error})
	} else {
		tFault = e.pathFault(fusefault.Fault{Mode: fusefault.Error})
	}
	waitFor(time.Duration(8*ioTimeout+60)*time.Second-time.Since(tFault), gone)
	limit := time.Duration(hostDead+60) * time.Second
	tAcq, acq := e.waitAcquired(e.b, limit-time.Since(tFault))
	tRenewal, _ := renewal.stop()
	time.Sleep(3 * time.Second)
	fails, checkDetail := e.noResetAndCheck()
	if tGone.IsZero() {
		fails = append(fails, "A's holder was not ended")
	}
	if !acq {
		fails = append(fails, fmt.Sprintf("B did not acquire within %v of the fault", limit))
	} else {
		if !tGone.IsZero() && tAcq.Before(tGone) {
			fails = append(fails, "B acquired before A's holder was gone")
		}
		if tRenewal.IsZero() || tAcq.Sub(tRenewal) < time.Duration(hostDead)*time.Second-2*renewalPoll {
			fails = append(fails, fmt.Sprintf("B acquired %.1f s after A's last renewal landed, before host_dead_seconds",
				tAcq.Sub(tRenewal).Seconds()))
		}
	}
	detail := fmt.Sprintf("no reset; fault→A's holder gone %s, fault→B acquired %s, A's last renewal→B acquired %s; %s",
		since(tFault, tGone), since(tFault, tAcq), since(tRenewal, tAcq), checkDetail)
	if hang > 0 {
		detail = fmt.Sprintf("hang %v then EIO; ", hang) + detail
	}
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// storageSlow: every request on A's path waits slowDelay for
// host_dead_seconds + 10 s. The renewals still end within io_timeout, so
// nothing may happen: no reset, A's holder goes on writing tokens, B is
// refused throughout.
func storageSlow(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	before := strings.Count(e.holderLog(e.a), " wrote lver ")
	tFault := e.pathFault(fusefault.Fault{Mode: fusefault.Delay, Delay: slowDelay})
	waitFor(time.Duration(hostDead+10)*time.Second, func() bool { return false })
	during := strings.Count(e.holderLog(e.a), " wrote lver ") - before
	e.pathFault(fusefault.Fault{})
	time.Sleep(3 * time.Second)
	fails, checkDetail := e.noResetAndCheck()
	if strings.Contains(e.holderLog(e.b), " acquired lver ") {
		fails = append(fails, "B acquired the lease")
	}
	if during < 10 {
		fails = append(fails, fmt.Sprintf("A's holder wrote %d tokens on the slow path", during))
	}
	detail := fmt.Sprintf("no reset, A kept the lease (%d tokens in %.0f s of %v per request), B refused %d times; %s",
		during, time.Since(tFault).Seconds(), slowDelay, e.refusals(e.b), checkDetail)
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// noResetAndCheck returns the failures common to the scenarios in which no
// guest may be reset: a WATCHDOG event on either guest, and the exclusion
// checker's verdict, whose detail is returned too.
func (e *env) noResetAndCheck() ([]string, string) {
	fails := e.resets()
	okCheck, checkDetail := e.check()
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	return fails, checkDetail
}

// resets returns "X was reset" for every guest X whose watchdog fired
// since the scenario began.
func (e *env) resets() []string {
	var r []string
	for _, g := range e.gs {
		if _, ok := e.qmpEvent(g, "WATCHDOG", e.tl.start); ok {
			r = append(r, g.name+" was reset")
		}
	}
	return r
}

// since formats t - from in seconds, or "-" when t is zero.
func since(from, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%.1f s", t.Sub(from).Seconds())
}
