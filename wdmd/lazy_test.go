package wdmd_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// The device opened on demand (docs/wdmd.md "Opening the device on
// demand"): the behaviour measured on wdmd 3.9.5 and 5.1.1.

func kinds(evs []testdev.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind))
	}
	return out
}

func openReply(t *testing.T, w *world, c *fakeConn, fire int) int {
	t.Helper()
	w.send(c, wdmd.Record{Cmd: wdmd.CmdOpenWatchdog, FireTimeout: uint32(fire)})
	var r wdmd.Record
	require.NoError(t, r.Unmarshal(<-c.replies))
	require.Equal(t, uint32(wdmd.CmdOpenWatchdog), r.Cmd)
	return int(r.FireTimeout)
}

func status(t *testing.T, w *world, c *fakeConn) wdmd.Record {
	t.Helper()
	w.send(c, wdmd.Record{Cmd: wdmd.CmdStatus})
	var r wdmd.Record
	require.NoError(t, r.Unmarshal(<-c.replies))
	return r
}

// TestLazyOpenClose: at start the device is only probed (open, get, magic
// close); the first OPEN_WATCHDOG opens it with the asked timeout and
// pings; a later one asking another timeout is answered with the one in
// force; the device is closed with the magic close when the last client
// goes; the next OPEN_WATCHDOG sets a new timeout, which also sets the
// test interval.
func TestLazyOpenClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{}, testdev.Options{})
		synctest.Wait()
		require.Equal(t, []string{"open", "get", "write", "close-clean"}, kinds(w.bank.Events()))
		require.False(t, w.bank.Armed("/dev/watchdog0"))

		w.sleepUntil(1002, 0)
		a, b := newConn(8, 100), newConn(9, 101)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: a}
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: b}
		require.Equal(t, 60, openReply(t, w, a, 60))
		require.True(t, w.bank.Armed("/dev/watchdog0"))
		require.Equal(t, 60, openReply(t, w, b, 30))
		st := status(t, w, b)
		require.Equal(t, uint32(10), st.TestInterval)
		require.Equal(t, uint32(60), st.FireTimeout)
		require.Equal(t, uint64(1002), st.LastKeepalive)

		w.sleepUntil(1005, 0)
		w.events <- wdmd.Event{Kind: wdmd.EvHangup, Conn: a}
		synctest.Wait()
		require.True(t, w.bank.Armed("/dev/watchdog0"), "one client left")
		w.events <- wdmd.Event{Kind: wdmd.EvHangup, Conn: b}
		synctest.Wait()
		require.False(t, w.bank.Armed("/dev/watchdog0"), "no client left")
		require.Contains(t, w.log.errors(), "1005 close watchdog unused")

		w.sleepUntil(1010, 0)
		c := newConn(10, 102)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c}
		require.Equal(t, 30, openReply(t, w, c, 30))
		st = status(t, w, c)
		require.Equal(t, uint32(5), st.TestInterval)
		require.Equal(t, uint32(30), st.FireTimeout)
		require.NoError(t, w.stop())

		evs := w.bank.Events()
		require.Equal(t, []string{"open", "get", "write", "close-clean",
			"open", "get", "ping", "ping", "write", "close-clean",
			"open", "get", "set", "get", "ping", "ping", "close-unclean"}, kinds(evs))
		require.Equal(t, 30, eventsOf(evs, testdev.SetTimeout)[0].Value)
	})
}

// TestIntervalFor: the test interval (and warning margin) of each fire
// timeout.
func TestIntervalFor(t *testing.T) {
	for fire, want := range map[int]uint64{120: 10, 60: 10, 59: 5, 30: 5, 29: 2, 10: 2, 9: 1, 1: 1} {
		require.Equal(t, want, wdmd.IntervalFor(fire), "fire %d", fire)
	}
}

// TestLazyMargin: with the device at 30 s the warning margin is 5 s, as
// measured on wdmd 3.9.5 (a client 6 s before its expiry passes, 5 s
// before it warns), and a failing client's device fires 30 s after the
// unclean close.
func TestLazyMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{GridOnly: true}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 2, connect: 1002, join: 1004, lastOK: 1004, fire: 30}
		w.runLockspace(ls, 7)
		require.Equal(t, 30, ls.opened)
		require.Equal(t, uint32(5), ls.status.TestInterval)
		require.Equal(t, uint32(30), ls.status.FireTimeout)
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.NoError(t, w.stop())
		// Expiry 1004+16 = 1020. Tests at 1002 (open), 1007, 1012 pass
		// (1012 < 1020-5); 1017 warns: unclean close, fire at 1047.
		closes := eventsOf(w.bank.Events(), testdev.CloseUnclean)
		require.Len(t, closes, 1)
		require.Equal(t, time.Duration(1017), closes[0].At/time.Second)
		require.Equal(t, time.Duration(1047), fire.At/time.Second)
	})
}

// TestLazyLegacyClient: a client that registers without OPEN_WATCHDOG (a
// sanlock 3.8.5) gets the device opened at 60 s at its REGISTER, so it is
// protected: STATUS says 60, the device fires when its renewals stop.
func TestLazyLegacyClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_LS:1", pid: 4242, io: 10, connect: 1003, join: 1006, lastOK: 1026}
		w.runLockspace(ls, 7)
		require.Equal(t, uint32(60), ls.status.FireTimeout)
		require.Equal(t, uint32(10), ls.status.TestInterval)
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.NoError(t, w.stop())
		evs := w.bank.Events()
		opens := eventsOf(evs, testdev.Open)
		require.Len(t, opens, 2) // the probe at start, the REGISTER
		require.Equal(t, time.Duration(1006), opens[1].At/time.Second)
		// Expiry 1026+80 = 1106: unclean close at 1096, fire at 1156.
		require.Equal(t, time.Duration(1096), eventsOf(evs, testdev.CloseUnclean)[0].At/time.Second)
		require.Equal(t, time.Duration(1156), fire.At/time.Second)
		require.Contains(t, w.log.errors(), "1006 open_watchdog for ci 2 pid 4242 without open_watchdog fire_timeout 60 result 60")
	})
}

// TestLazyDeadSlotKeepsDevice: a client that dies with an expiry keeps
// the device armed (it is still a client), and the device fires; one that
// clears its expiry first lets the device be closed.
func TestLazyDeadSlotKeepsDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{}, testdev.Options{})
		dies := &lockspace{name: "sanlock_A:1", pid: 1, io: 10, connect: 1003, join: 1006, lastOK: 1006, hangupAt: 1010, fire: 60}
		clean := &lockspace{name: "sanlock_B:1", pid: 2, io: 10, connect: 1003, join: 1006, lastOK: 1006, deactAt: 1008, hangupAt: 1009, fire: 60}
		done := make(chan struct{})
		go func() { w.runLockspace(clean, 8); close(done) }()
		w.runLockspace(dies, 7)
		<-done
		fire, err := w.bank.WaitFired(t.Context())
		require.NoError(t, err)
		require.NoError(t, w.stop())
		// Expiry 1086: unclean close at 1076, fire at 1136.
		require.Equal(t, time.Duration(1136), fire.At/time.Second)
		require.NotContains(t, w.log.errors(), "close watchdog unused")
	})
}

// TestLazyRecoveryCloses: a failing client that clears its expiry and
// goes lets the test loop reopen the device (closed unclean) and then
// disarm it, since no client is left.
func TestLazyRecoveryCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{}, testdev.Options{})
		ls := &lockspace{name: "sanlock_A:1", pid: 1, io: 10, connect: 1003, join: 1006, lastOK: 1006, deactAt: 1090, hangupAt: 1091, fire: 60}
		w.runLockspace(ls, 7)
		w.sleepUntil(1100, 0)
		require.False(t, w.bank.Armed("/dev/watchdog0"))
		require.NoError(t, w.stop())
		evs := w.bank.Events()
		require.Empty(t, eventsOf(evs, testdev.Fire))
		require.Equal(t, []string{"close-unclean", "open", "ping", "write", "close-clean"}, kinds(evs[len(evs)-5:]))
	})
}

// TestLazyOpenFails: when the device cannot be opened, OPEN_WATCHDOG is
// answered 0, and STATUS says fire_timeout 0, so that neither a 3.9+ nor a
// 3.8.5 sanlock joins without protection.
func TestLazyOpenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startLazyWorld(t, wdmd.Config{}, testdev.Options{RejectSetTimeout: true, InitialTimeout: 30})
		w.sleepUntil(1002, 0)
		c := newConn(8, 100)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c}
		require.Equal(t, 0, openReply(t, w, c, 60))
		require.Equal(t, uint32(0), status(t, w, c).FireTimeout)
		var r wdmd.Record
		r.Cmd = wdmd.CmdRegister
		_ = r.SetName("sanlock_old:1")
		d := newConn(9, 101)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: d}
		w.send(d, r)
		require.Equal(t, uint32(0), status(t, w, d).FireTimeout)
		require.False(t, w.bank.Armed("/dev/watchdog0"))
		require.NoError(t, w.stop())
	})
}
