package wdmd_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// hostDead is host_dead_seconds of a lockspace (docs/timing.md "Which io_timeout"): other
// hosts may take the victim's leases this long after its last renewal L.
func hostDead(io uint64) uint64 { return 8*io + wdmd.DefaultFireTimeout }

// TestTimelineIO10 checks the spec's timeline (docs/wdmd.md "The timeline") second by
// second for io_timeout 10. sanlock connects at 1003 (the first test runs
// at once), activates after its acquire with L0 = 1006 and renews every
// 20 s until L = 1086, so the expiry is E = L+80 = 1166. Tests every 10 s
// ping the device. The first test at or after E-10 = L+70 warns and
// closes the device unclean (its last ping); 1-s tests follow and fail
// from E = L+80; the device fires 60 s after the close, inside
// [L+130, L+140), before the host_dead_seconds L+140 other hosts wait.
// By default our wdmd runs that test exactly at E-10; with GridOnly (the
// 3.8.5 behaviour) it is the next test of the 10-s grid, here L+77.
func TestTimelineIO10(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gridOnly bool
		close    uint64
	}{
		{"early", false, 1156},
		{"grid", true, 1163},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := startWorld(t, wdmd.Config{GridOnly: tc.gridOnly}, testdev.Options{})
				ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1006, lastOK: 1086}
				w.runLockspace(ls, 7)
				L := ls.lastRenew
				require.Equal(t, uint64(1086), L)
				require.Equal(t, []uint64{1026, 1046, 1066, 1086}, ls.renewals)
				require.Equal(t, uint32(10), ls.status.TestInterval)
				require.Equal(t, uint32(60), ls.status.FireTimeout)

				fire, err := w.bank.WaitFired(t.Context())
				require.NoError(t, err)
				require.NoError(t, w.stop())

				evs := w.bank.Events()
				// Pings: the open and the loop's first ping at 1000, a test
				// at the connect (1003) and every 10 s while passing, then
				// the unclean close.
				want := append([]uint64{1000, 1000}, seq(1003, 1153, 10)...)
				want = append(want, tc.close)
				require.Equal(t, want, pingSeconds(evs))
				closes := eventsOf(evs, testdev.CloseUnclean)
				require.Len(t, closes, 1)
				tcl := uint64(closes[0].At / time.Second)
				require.Equal(t, tc.close, tcl)
				require.GreaterOrEqual(t, tcl, L+70)
				require.Less(t, tcl, L+80)
				f := uint64(fire.At / time.Second)
				require.Equal(t, tcl+60, f)
				require.GreaterOrEqual(t, f, L+130)
				require.Less(t, fire.At, time.Duration(L+hostDead(10))*time.Second)

				lines := w.log.errors()
				require.Equal(t, "1000 /dev/watchdog0 armed with fire_timeout 60", lines[0])
				i := 1
				for s := tc.close; s < 1166; s++ {
					cl := tc.close
					if s == tc.close {
						cl = 0
					}
					require.Equal(t, fmt.Sprintf("%d test warning now %d ping 1153 close %d renewal 1086 expire 1166 client 4242 sanlock_LS:1", s, s, cl), lines[i])
					i++
					if s == tc.close {
						require.Equal(t, fmt.Sprintf("%d /dev/watchdog0 closed unclean", s), lines[i])
						i++
					}
				}
				for s := uint64(1166); s < f; s++ {
					require.Equal(t, fmt.Sprintf("%d test failed rem %d now %d ping 1153 close %d renewal 1086 expire 1166 client 4242 sanlock_LS:1",
						s, 60-(s-tc.close), s, tc.close), lines[i])
					i++
				}
				writeTimeline(t, "io10-"+tc.name, ls, evs, lines)
			})
		})
	}
}

// TestTimelineIO10Recovery: when every holder is gone, sanlock removes
// the expiry (test_live 0 0) and clears the refcount; the next 1-s test
// passes, reopens the device and pings it: no reset (docs/wdmd.md "The timeline").
func TestTimelineIO10Recovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1006, lastOK: 1086, deactAt: 1086 + 85}
		w.runLockspace(ls, 7)
		w.sleepUntil(1400, 0)
		require.NoError(t, w.stop())
		_, fired := w.bank.FireEvent()
		require.False(t, fired)

		evs := w.bank.Events()
		opens := eventsOf(evs, testdev.Open)
		require.Len(t, opens, 2)
		// 1-s tests run at x.6 (the phase of the last renewal event);
		// the deactivation at 1171.5 makes the test at 1171.5 pass.
		require.Equal(t, uint64(1171), uint64(opens[1].At/time.Second)) // L+85
		want := append([]uint64{1000, 1000}, seq(1003, 1153, 10)...)
		want = append(want, 1156)                   // unclean close
		want = append(want, 1171, 1171)             // reopen + ping
		want = append(want, seq(1181, 1391, 10)...) // 10-s tests again
		want = append(want, 1400)                   // the monitor was stopped like a killed process
		require.Equal(t, want, pingSeconds(evs))
		require.Contains(t, w.log.errors(), "1171 /dev/watchdog0 reopen")
	})
}

// TestTimelineIO1: with io_timeout 1 the expiry (L+8) is always within
// the 10-s warning margin, so every test fails even while the lockspace
// renews: the test at the activation closes the device and it fires 60 s
// later (docs/wdmd.md "Test loop", as verified with wdmd 3.8.5), before the
// host_dead_seconds (68) after the first and every later renewal.
func TestTimelineIO1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 1, connect: 1003, join: 1006, lastOK: 1040}
		lsDone := make(chan struct{})
		go func() { w.runLockspace(ls, 7); close(lsDone) }()
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		<-lsDone
		require.NoError(t, w.stop())
		evs := w.bank.Events()
		require.Equal(t, []uint64{1000, 1000, 1003, 1006}, pingSeconds(evs))
		require.Equal(t, testdev.CloseUnclean, evs[len(evs)-2].Kind)
		require.Equal(t, uint64(1066), uint64(fire.At/time.Second))
		lines := w.log.errors()
		require.Equal(t, "1006 test warning now 1006 ping 1003 close 0 renewal 1006 expire 1014 client 4242 sanlock_LS:1", lines[1])
		require.Equal(t, "1006 /dev/watchdog0 closed unclean", lines[2])
		require.Equal(t, "1007 test warning now 1007 ping 1003 close 1006 renewal 1006 expire 1014 client 4242 sanlock_LS:1", lines[3])
		require.Equal(t, "1009 test warning now 1009 ping 1003 close 1006 renewal 1008 expire 1016 client 4242 sanlock_LS:1", lines[5])
		require.Equal(t, "1008 test warning now 1008 ping 1003 close 1006 renewal 1006 expire 1014 client 4242 sanlock_LS:1", lines[4])
		require.Less(t, fire.At, time.Duration(1006+hostDead(1))*time.Second)
		require.Equal(t, uint64(1040), ls.lastRenew)
		writeTimeline(t, "io1", ls, evs, lines)
	})
}

// TestFireBeforeHostDead sweeps io_timeouts, the phase of the activation
// against wdmd's 10-s test grid, and the number of renewals before they
// stop: the device always fires before the victim's host_dead_seconds
// L+8*io+60 after its last renewal L (other hosts count from when they
// saw L, never earlier), and, when the expiry is beyond the warning
// margin, not before E-10+60 (E = L+8*io). With GridOnly (3.8.5
// behaviour) the io_timeout 1 case can fire up to 2 s after
// host_dead_seconds; the test measures and logs that.
func TestFireBeforeHostDead(t *testing.T) {
	for _, gridOnly := range []bool{false, true} {
		worst := map[uint64]int64{}
		for _, io := range []uint64{1, 2, 3, 5, 10, 20} {
			worst[io] = -1 << 62
			for phase := uint64(0); phase < 10; phase++ {
				for _, n := range []uint64{0, 1, 4} {
					synctest.Test(t, func(t *testing.T) {
						w := startWorld(t, wdmd.Config{GridOnly: gridOnly}, testdev.Options{})
						join := 1006 + phase
						ls := &lockspace{name: "sanlock_LS:1", pid: 7, io: io, connect: 1003, join: join, lastOK: join + 2*io*n}
						w.runLockspace(ls, 7)
						fire, err := w.bank.WaitFired(t.Context())
						require.NoError(t, err)
						require.NoError(t, w.stop())
						L, E := ls.lastRenew, ls.lastRenew+8*io
						f := uint64(fire.At / time.Second)
						worst[io] = max(worst[io], int64(f)-int64(L+hostDead(io)))
						if gridOnly && io == 1 {
							return
						}
						require.Less(t, fire.At, time.Duration(L+hostDead(io))*time.Second,
							"io %d phase %d renewals %d L=%d", io, phase, n, L)
						if 8*io > wdmd.WarnMargin {
							require.GreaterOrEqual(t, f, E-wdmd.WarnMargin+60, "L=%d", L)
						}
					})
				}
			}
		}
		t.Logf("gridOnly=%v: latest fire relative to host_dead_seconds per io_timeout: %v", gridOnly, worst)
		if gridOnly {
			require.Positive(t, worst[1], "3.8.5 grid timing should show the io_timeout 1 hazard")
		}
	}
}

// TestClientKilledKeepsExpiry: sanlock killed with a joined lockspace
// (its connection ends with an expiry set): the slot stays dead with its
// refcount and expiry, SIGTERM is ignored, and the device fires
// (docs/wdmd.md "Connection loss", "sanlock side").
func TestClientKilledKeepsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1003, lastOK: 1043, hangupAt: 1050}
		w.runLockspace(ls, 7)
		w.events <- wdmd.Event{Kind: wdmd.EvSignal, Signal: wdmd.SigTerm}
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.True(t, ls.conn.isClosed())
		require.Contains(t, w.log.errors(), "1050 client dead ci 2 fd 7 pid 4242 renewal 1043 expire 1123 sanlock_LS:1")
		require.Equal(t, uint64(1113+60), uint64(fire.At/time.Second))
		require.Contains(t, w.mon.Dump(), "client 2 name sanlock_LS:1 pid 4242 fd -1 dead 1 ref 1 now 1173 renewal 1043 expire 1123\n")
		require.NoError(t, w.stop())
	})
}

// TestWdmdKilledFires: wdmd dying closes the device without the magic:
// it fires 60 s later (docs/wdmd.md "wdmd crash").
func TestWdmdKilledFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		w.sleepUntil(1025, 0)
		require.NoError(t, w.kill())
		evs := w.bank.Events()
		require.Equal(t, testdev.CloseUnclean, evs[len(evs)-1].Kind)
		require.True(t, w.bank.Armed("/dev/watchdog0"))
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.Equal(t, uint64(1025+60), uint64(fire.At/time.Second))
	})
}

// TestQuit: SIGTERM is dropped while a refcount is set and honoured once
// it is cleared; the device is closed with the magic and never fires.
func TestQuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1003, lastOK: 1043, deactAt: 1050}
		go w.runLockspace(ls, 7)
		w.sleepUntil(1030, 0)
		w.events <- wdmd.Event{Kind: wdmd.EvSignal, Signal: wdmd.SigTerm}
		w.sleepUntil(1060, 0)
		select {
		case err := <-w.done:
			t.Fatalf("quit with a refcount set: %v", err)
		default:
		}
		w.events <- wdmd.Event{Kind: wdmd.EvSignal, Signal: wdmd.SigInt}
		require.NoError(t, <-w.done)
		evs := w.bank.Events()
		require.Equal(t, testdev.CloseClean, evs[len(evs)-1].Kind)
		require.False(t, w.bank.Armed("/dev/watchdog0"))
		require.Equal(t, "1060 /dev/watchdog0 disarmed", last(w.log.errors()))
		w.bank.Stop()
	})
}

// TestQuitWhileClosedUnclean: a quit while the device is closed unclean
// skips the clean close; the device stays armed and fires (docs/wdmd.md "Startup").
func TestQuitWhileClosedUnclean(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1003, lastOK: 1003}
		w.runLockspace(ls, 7)
		w.sleepUntil(1080, 0) // warning from 1073 (first test >= expire-10)
		w.send(ls.conn, wdmd.Record{Cmd: wdmd.CmdRefcountClear})
		w.events <- wdmd.Event{Kind: wdmd.EvSignal, Signal: wdmd.SigTerm}
		require.NoError(t, <-w.done)
		require.Equal(t, "1080 close_watchdog already closed", last(w.log.errors()))
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.Equal(t, uint64(1073+60), uint64(fire.At/time.Second))
		w.bank.Stop()
	})
}

func last(s []string) string { return s[len(s)-1] }

// writeTimeline stores a simulated timeline as a table under
// testdata/timeline-<name>.txt when WDMD_TIMELINE_DIR is set; the docs'
// picture is drawn from it (wdmd/internal/timelinesvg).
func writeTimeline(t *testing.T, name string, ls *lockspace, evs []testdev.Event, lines []string) {
	dir := timelineDir()
	if dir == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# io_timeout %d, join %d, last renewal %d, expire %d, host_dead %d\n",
		ls.io, ls.join, ls.lastRenew, ls.lastRenew+8*ls.io, ls.lastRenew+hostDead(ls.io))
	fmt.Fprintf(&b, "io %d\nlast_renewal %d\nexpire %d\nhost_dead %d\n", ls.io, ls.lastRenew, ls.lastRenew+8*ls.io, ls.lastRenew+hostDead(ls.io))
	for _, r := range append([]uint64{ls.join}, ls.renewals...) {
		fmt.Fprintf(&b, "renewal %d\n", r)
	}
	for _, e := range evs {
		fmt.Fprintf(&b, "device %d %s\n", uint64(e.At/time.Second), e.Kind)
	}
	for _, l := range lines {
		sec, msg, _ := strings.Cut(l, " ")
		switch {
		case strings.HasPrefix(msg, "test warning"):
			fmt.Fprintf(&b, "wdmd %s warning\n", sec)
		case strings.HasPrefix(msg, "test failed"):
			fmt.Fprintf(&b, "wdmd %s failed\n", sec)
		}
	}
	writeFile(t, dir, "timeline-"+name+".txt", b.String())
}
