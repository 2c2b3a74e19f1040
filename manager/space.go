package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
	"github.com/gosanlock/gosanlock/wire"
)

// thread is the life of one lockspace: join, then the main-loop checks
// until it stops, then the release and the freeing of the entry.
func (sp *space) thread() {
	m := sp.m
	defer m.wg.Done()
	err := sp.join()
	sp.addResult = withCause(err, sp.clientCause)
	if err != nil {
		// Free first: once the caller has its answer, the entry is gone.
		sp.log().Warn("add_lockspace fail", resultField(err), spaceField(sp.ls.Name), zap.String("cause", sp.addCauseText()))
		sp.free()
		close(sp.addDone)
		return
	}
	close(sp.addDone)
	sp.log().Warn("add_lockspace done")
	sp.monitor()
	sp.stop()
}

// join opens the disk, starts the runner and waits for the acquire
// (docs/delta.md "Lockspace start-up"–"Completing the add"). It returns nil after moving the entry to
// spaces.
func (sp *space) join() error {
	m := sp.m
	cfg := m.conf()
	dev, err := m.cfg.Open(sp.ls.Disk.Path)
	if err != nil {
		sp.addCause = fmt.Sprintf("open %s: %s", sp.disk(), causeLog(err, 0))
		sp.clientCause = openCause(sp.ls.Disk.Path, err)
		sp.log().Info("open error", zap.String("disk", sp.disk()), causeField(err, 0))
		return rescode.Code(rescode.RvENODEV)
	}
	if sp.ls.HostID > delta.MaxHostID {
		// Beyond any geometry: the sizes decide between a bad lease and
		// SANLK_ADDLS_INVALID_HOSTID, as in the lockspace thread.
		ioctx, cancel := context.WithTimeout(sp.ctx, time.Duration(sp.ioTimeoutNow())*time.Second)
		_, err := diskfmt.LockspaceGeometry(ioctx, dev, int64(sp.ls.Disk.Offset))
		cancel()
		_ = dev.Close()
		if err != nil {
			sp.addCause = fmt.Sprintf("read of the lockspace geometry at %s: %s", sp.disk(), causeLog(err, sp.ioTimeoutNow()))
			sp.clientCause = fmt.Sprintf("no lockspace can be read at %s", sp.disk())
			return resultErr(err)
		}
		sp.addCause = fmt.Sprintf("host_id %d is beyond the lockspace at %s", sp.ls.HostID, sp.disk())
		sp.clientCause = sp.addCause
		return rescode.ErrAddLSInvalidHostID
	}
	var wd WatchdogSession
	if cfg.UseWatchdog {
		var err error
		if wd, err = m.openWatchdog(sp.ls.Name, sp.ls.HostID); err != nil {
			sp.addCause = "wdmd: " + causeLog(err, 0)
			sp.clientCause = "the watchdog daemon (wdmd) refused: " + causeLog(err, 0)
			sp.log().Info("wdmd open failed", causeField(err, 0))
			_ = dev.Close()
			return rescode.ErrWatchdog
		}
	}
	hist := cfg.RenewalHistorySize
	if hist <= 0 {
		hist = -1
	}
	failSecs := uint64(delta.IDRenewalFailSeconds(sp.ioTimeoutNow()))
	var run *delta.Lockspace
	dcfg := delta.Config{
		Dev: dev, Offset: int64(sp.ls.Disk.Offset), Space: sp.ls.Name, HostID: sp.ls.HostID,
		HostName: m.hostName(), IOTimeout: sp.ioTimeoutNow(), WatchdogFireTimeout: cfg.WatchdogFireTimeout,
		SetBitmapSeconds: cfg.SetBitmapSeconds, HistorySize: hist, Clock: m.cfg.Clock, Log: sp.deltaLog(),
		DebugRenew: cfg.DebugRenew, OnRenewal: sp.onRenewal(m.renewalHook(sp.ls.Name)),
		NoDelay: sp.noDelay,
	}
	if wd != nil {
		dcfg.OnAcquired = func(_ context.Context, last uint64) error {
			if err := wd.Activate(last, last+failSecs); err != nil {
				sp.log().Info("wdmd activate failed", causeField(err, 0))
				return fmt.Errorf("%w: %v", rescode.ErrWatchdog, err)
			}
			m.mu.Lock()
			sp.wdActive = true
			m.mu.Unlock()
			return nil
		}
		dcfg.OnRenewed = func(ts uint64) {
			// The own io_timeout may have changed at this renewal
			// (SET_CONFIG IO_TIMEOUT): the expiry follows it.
			failSecs := uint64(delta.IDRenewalFailSeconds(run.Timing().IOTimeout))
			if err := wd.Renewed(ts, ts+failSecs); err != nil {
				// wdmd is gone and the host will be reset: stop renewing
				// (without releasing) rather than look alive (docs/wdmd.md "wdmd crash").
				sp.log().Error("wdmd_test_live failed: renewals stopped", zap.Uint64("renewal", ts), causeField(err, 0),
					spaceField(sp.ls.Name))
				run.Halt()
			}
		}
	}
	run, err = delta.New(dcfg)
	if err != nil {
		sp.addCause = fmt.Sprintf("lockspace at %s: %s", sp.disk(), causeLog(err, sp.ioTimeoutNow()))
		sp.clientCause = fmt.Sprintf("lockspace %s at %s: %s", sp.ls.Name, sp.disk(), orCode(plainCause(err), err))
		_ = dev.Close()
		if wd != nil {
			_ = wd.Close()
		}
		return resultErr(err)
	}
	m.mu.Lock()
	sp.run, sp.wd = run, wd
	m.mu.Unlock()
	m.wg.Add(1)
	m.cfg.spawn(func() {
		defer m.wg.Done()
		err := run.Run(sp.ctx)
		if st := run.Status(); st.Joined {
			if err != nil && !errors.Is(err, context.Canceled) {
				sp.log().Info("lockspace runner stopped", zap.Int("released", b2i(st.Released)), spaceField(sp.ls.Name),
					zap.String("disk", sp.disk()), causeField(err, sp.ioTimeoutNow()))
			} else {
				sp.log().Info("lockspace runner stopped", zap.Int("released", b2i(st.Released)))
			}
		}
		if wd != nil {
			// Still active only if holders may remain (daemon stop): wdmd
			// then keeps our expiry and the host is reset.
			_ = wd.Close()
		}
		_ = dev.Close()
	})

	m.cfg.await(run.Joined())
	st := run.Status()
	if st.AcquireLastResult != rescode.OK {
		m.cfg.await(run.Done())
		sp.addCause = fmt.Sprintf("delta_acquire of host_id %d at %s: %s", sp.ls.HostID, sp.disk(),
			st.AcquireLastResult.Error())
		sp.clientCause = sp.acquireCause(st.AcquireLastResult)
		return st.AcquireLastResult
	}
	m.mu.Lock()
	if sp.removeReq || m.forced || m.stopped {
		m.mu.Unlock()
		sp.log().Info("add_lockspace undo", zap.String("lockspace", wire.LockspaceString(&sp.ls)))
		sp.deactivateWatchdog()
		sp.cancel()
		m.cfg.await(run.Done())
		return rescode.Code(rescode.RvEPERM)
	}
	m.move(sp, listSpaces)
	m.mu.Unlock()
	sp.saveGeneration(st.HostGeneration)
	return nil
}

// openWatchdog connects lockspace space to the watchdog and asks wdmd to
// arm the device with our watchdog_fire_timeout (OPEN_WATCHDOG, as sanlock
// 3.9 and later do before the delta-lease acquire; docs/wdmd.md "sanlock
// side"). wdmd 3.8.5 does not answer that command: its device is armed
// with 60 s from its start, which Activate checks through STATUS. A
// refusal (the device cannot be armed, or is armed with another timeout)
// is an error: the add fails with -203.
func (m *Lockspaces) openWatchdog(space string, hostID uint64) (WatchdogSession, error) {
	if m.cfg.OpenWatchdog != nil {
		return m.cfg.OpenWatchdog(space, hostID)
	}
	cfg := m.conf()
	sock := cfg.WdmdSocket
	if sock == "" {
		sock = wdmdclient.DefaultSocket
	}
	s, err := wdmdclient.Open(sock, space, hostID)
	if err != nil {
		return nil, err
	}
	s.FireTimeout = cfg.WatchdogFireTimeout
	if err := s.OpenWatchdog(0); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open_watchdog with fire_timeout %d failed: %w", s.FireTimeout, err)
	}
	if s.Unanswered() {
		m.lg().Info("wdmd did not answer open_watchdog: a wdmd that arms its device at its start (3.8.5)",
			zap.String("lockspace", space), zap.Int("fire_timeout", s.FireTimeout))
	}
	return s, nil
}

// deactivateWatchdog removes our expiry from the watchdog once nothing
// uses the lockspace any more (all pids clear, add undone), so the host
// is not reset (docs/wdmd.md "sanlock side" step 5).
func (sp *space) deactivateWatchdog() {
	m := sp.m
	m.mu.Lock()
	wd, active := sp.wd, sp.wdActive
	sp.wdActive = false
	m.mu.Unlock()
	if wd == nil || !active {
		return
	}
	sp.log().Info("wdmd_test_live 0 0 to disable")
	if err := wd.Deactivate(); err != nil {
		sp.log().Error("wdmd deactivate failed", causeField(err, 0), spaceField(sp.ls.Name))
	}
}

// free removes the entry and closes its listeners.
func (sp *space) free() {
	m := sp.m
	sp.cancel()
	m.mu.Lock()
	m.unlink(sp)
	ls := sp.listeners
	sp.listeners = nil
	m.mu.Unlock()
	for _, c := range ls {
		_ = c.Close()
	}
	close(sp.gone)
}

// stop ends a lockspace that left the spaces list: the runner releases the
// lease if its last attempt succeeded (docs/delta.md "Removing a lockspace"), then the entry is
// freed.
func (sp *space) stop() {
	sp.cancel()
	sp.m.mu.Lock()
	run := sp.run
	sp.m.mu.Unlock()
	if run != nil {
		sp.m.cfg.await(run.Done())
	}
	sp.log().Info("free lockspace")
	sp.free()
	if u := sp.m.usage; u != nil {
		u.SpaceGone(sp.ls.Name)
	}
}

// monitor is the per-lockspace main loop (docs/delta.md "Main loop"):
// check our own lease and the other hosts; once the lockspace is dying,
// signal its holders until none is left, then move it to rem and return.
//
// sanlock's loop passes every second. Here a pass that finds the own
// lease good and nothing to do (passIdle) waits only for what can change
// the outcome of the next one (docs/performance.md "Idle cost (session
// 7)"): a renewal attempt (a new read of the other hosts' records, maybe
// a corrupt lease), rem_lockspace or the forced shutdown (each sends on
// sp.wake), or the pass at which the own-lease check would first warn
// (idleWait). A pass in between would find the same: the check's outcome
// changes only at those seconds, the host table only after a renewal
// read. From the warning on, and while holders are killed, passes come
// every CheckInterval (CheckInterval/5) as before, so the warning and
// failure passes and the recovery keep their seconds (TestEscalation,
// docs/timing.md).
func (sp *space) monitor() {
	m := sp.m
	run := sp.run
	for {
		// A wake-up that comes during a pass (or while not idle) makes the
		// next idle wait return at once: one more pass, which finds the
		// same or newer state.
		interval := m.cfg.CheckInterval
		var err error
		switch sp.pass(run) {
		case passStop:
			return
		case passKilling:
			err = m.cfg.Clock.Sleep(sp.ctx, interval/5)
		case passIdle:
			_, err = m.cfg.Clock.Wait(sp.ctx, sp.idleWait(run, interval), sp.wake)
		default:
			err = m.cfg.Clock.Sleep(sp.ctx, min(sp.untilDeadline(run, interval), untilBoundary(m.cfg.Clock.Now(), interval)))
		}
		if err != nil {
			// Daemon stop: leave without waiting for holders.
			m.mu.Lock()
			if sp.list == listSpaces {
				m.move(sp, listRem)
			}
			m.mu.Unlock()
			return
		}
	}
}

// onRenewal is the delta runner's OnRenewal: the daemon's hook, then a
// wake-up of the main loop, which processes the new read (and sees a
// corrupt lease) at once instead of at its next pass.
func (sp *space) onRenewal(hook func(err error, readMs, writeMs int64)) func(err error, readMs, writeMs int64) {
	return func(err error, readMs, writeMs int64) {
		if hook != nil {
			hook(err, readMs, writeMs)
		}
		sp.syncIOTimeout()
		clock.Wake(sp.wake)
	}
}

// syncIOTimeout takes the runner's io_timeout, which a renewal may have
// changed (SET_CONFIG IO_TIMEOUT), as the lockspace's: the kill deadlines,
// STATUS and RENEWAL follow it.
func (sp *space) syncIOTimeout() {
	m := sp.m
	m.mu.Lock()
	run := sp.run
	m.mu.Unlock()
	if run != nil {
		sp.ioTimeout.Store(int32(run.Timing().IOTimeout))
	}
}

// ioTimeoutNow is the lockspace's own io_timeout.
func (sp *space) ioTimeoutNow() int { return int(sp.ioTimeout.Load()) }

// idleWait is the longest wait after a pass that found the own lease good:
// until the pass at which the check would first warn, the first pass of
// the every-interval schedule (untilBoundary) at or after second
// L + id_renewal_warn_seconds (L = the last successful renewal), and no
// later than the failure deadline (untilDeadline's pass). Those are the
// passes that would have logged the warning and started the recovery
// with a pass every interval, at the same times. Before a renewal result
// is known it is the next pass of that schedule.
func (sp *space) idleWait(run *delta.Lockspace, interval time.Duration) time.Duration {
	now := sp.m.cfg.Clock.Now()
	last := run.Status().RenewalLastSuccess
	next := untilBoundary(now, interval)
	if last == 0 || interval <= 0 {
		return next
	}
	warn := time.Duration(last+uint64(delta.IDRenewalWarnSeconds(sp.ioTimeoutNow()))) * time.Second
	fail := time.Duration(last+uint64(delta.IDRenewalFailSeconds(sp.ioTimeoutNow()))) * time.Second
	at := now + next
	if warn > at {
		at += (warn - at + interval - 1) / interval * interval
	}
	if fail > now && fail < at {
		at = fail
	}
	return at - now
}

// untilBoundary is the time from now to the next multiple of every on the
// clock. Passes that come on the clock's whole seconds (monotime changes
// exactly there) rather than at each lockspace's own phase let the
// runtime wake once a second for all idle lockspaces instead of once per
// lockspace.
func untilBoundary(now, every time.Duration) time.Duration {
	if every <= 0 {
		return every
	}
	return every - now%every
}

// untilDeadline shortens the sleep before the next pass so that it comes
// right at the failure deadline L + id_renewal_fail_seconds (L = the last
// successful renewal, docs/delta.md "Own-lease check") instead of up to a CheckInterval
// later: recovery (kill program, SIGTERM) then starts within a few
// milliseconds of the deadline and the holders get their whole grace
// period before the watchdog fires (docs/wdmd.md, TestEscalation). A
// renewal during the sleep just makes that pass find the lease good.
func (sp *space) untilDeadline(run *delta.Lockspace, interval time.Duration) time.Duration {
	st := run.Status()
	if st.RenewalLastSuccess == 0 {
		return interval
	}
	// Monotime is whole seconds of the same clock, so the check fails
	// exactly from (L+fail) seconds on.
	deadline := time.Duration(st.RenewalLastSuccess+uint64(delta.IDRenewalFailSeconds(sp.ioTimeoutNow()))) * time.Second
	if d := deadline - sp.m.cfg.Clock.Now(); d > 0 && d < interval {
		return d
	}
	return interval
}

type passResult int

const (
	passOK   passResult = iota
	passIdle            // own lease good, nothing to do: see idleWait
	passKilling
	passStop
)

// pass is one main-loop pass for this lockspace.
func (sp *space) pass(run *delta.Lockspace) passResult {
	m := sp.m
	u := m.usage
	m.mu.Lock()
	killing := sp.end.dead()
	m.mu.Unlock()

	if !killing {
		st, _ := run.CheckOwnLease()
		m.mu.Lock()
		remove, forced := sp.removeReq, m.forced
		if st.Failed() || remove || forced {
			sp.end = endKilling
			killing = true
		}
		m.mu.Unlock()
		if !killing {
			sp.processHosts(run)
			if st == delta.OwnLeaseGood {
				return passIdle
			}
			return passOK
		}
		sp.log().Info("set killing_pids", zap.Int("check", b2i(st.Failed())), zap.Int("remove", b2i(remove || forced)))
		if u != nil {
			u.SpaceDead(sp.ls.Name)
		}
	}

	var holders []int
	var orphans int
	if u != nil {
		holders = u.SpaceHolders(sp.ls.Name)
		_, orphans = u.SpaceResources(sp.ls.Name)
	}
	if sp.allGone(holders, orphans) {
		sp.deactivateWatchdog() // as early as possible: no reset needed
		// Nothing uses the lockspace any more: if it is dying because the
		// renewals failed, the runner may release the lease once the
		// storage answers again (bounded, delta.LateReleaseDeadline).
		// Not for rem_lockspace or a forced shutdown: those return as
		// before instead of waiting for the storage.
		m.mu.Lock()
		late := !sp.removeReq && !m.forced
		m.mu.Unlock()
		if late {
			run.ReleaseWhenBack(m.baseContext())
		}
		m.mu.Lock()
		m.move(sp, listRem)
		m.mu.Unlock()
		sp.log().Info("set thread_stop")
		return passStop
	}
	sp.killPids(run, holders)
	return passKilling
}

// allGone is the test of docs/delta.md "All holders gone".
func (sp *space) allGone(holders []int, orphans int) bool {
	m := sp.m
	m.mu.Lock()
	defer m.mu.Unlock()
	live, stuck := 0, 0
	for _, pid := range holders {
		if k := sp.kills[pid]; k != nil && k.count >= killCountMax {
			stuck++
		} else {
			live++
		}
	}
	if live == 0 && stuck > 0 && sp.end != endStuck {
		sp.end = endStuck
		sp.log().Error("killing pids stuck", zap.Int("stuck", stuck), spaceField(sp.ls.Name))
	}
	if live+stuck > 0 {
		return false
	}
	if sp.externalUsed {
		if sp.usedRetries%1000 == 0 {
			sp.log().Warn("used external blocking lockspace removal")
		}
		sp.usedRetries++
		return false
	}
	if sp.usedByOrphans && orphans > 0 {
		if sp.usedRetries%1000 == 0 {
			sp.log().Warn("used by orphans blocking lockspace removal", zap.Int("orphans", orphans))
		}
		sp.usedRetries++
		return false
	}
	sp.log().Warn("all pids clear")
	return true
}

// processHosts runs the other-host processing on a new renewal read and
// hands out its events and requests (docs/delta.md "Watching other hosts", "Receiving events").
func (sp *space) processHosts(run *delta.Lockspace) {
	res, ok := run.ProcessHosts()
	if !ok {
		return
	}
	for _, ev := range res.Events {
		sp.deliver(ev)
	}
	if len(res.Requests) > 0 {
		sp.m.examine(sp.ls.Name)
	}
}
