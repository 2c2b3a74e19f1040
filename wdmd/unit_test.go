package wdmd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"testing"
	"testing/quick"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

func TestRecordLayout(t *testing.T) {
	r := wdmd.Record{Magic: 1, Cmd: 2, Len: 3, Flags: 4, TestInterval: 5, FireTimeout: 6,
		LastKeepalive: 7, RenewalTime: 8, ExpireTime: 9}
	require.NoError(t, r.SetName("sanlock_LS:1"))
	b := r.Marshal()
	require.Len(t, b, wdmd.RecordSize)
	le := binary.LittleEndian
	for off, v := range map[int]uint32{0: 1, 4: 2, 8: 3, 12: 4, 16: 5, 20: 6} {
		require.Equal(t, v, le.Uint32(b[off:]), "offset %d", off)
	}
	for off, v := range map[int]uint64{24: 7, 32: 8, 40: 9} {
		require.Equal(t, v, le.Uint64(b[off:]), "offset %d", off)
	}
	require.Equal(t, "sanlock_LS:1", string(b[48:60]))
	require.Equal(t, make([]byte, 128-12), b[60:])
	var back wdmd.Record
	require.NoError(t, back.Unmarshal(b))
	require.Equal(t, r, back)
	require.Error(t, back.Unmarshal(b[:175]))

	require.NoError(t, r.SetName(string(bytes.Repeat([]byte("x"), 128))))
	require.Equal(t, 128, len(r.NameString()))
	require.Error(t, r.SetName(string(bytes.Repeat([]byte("x"), 129))))
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		now, expire uint64
		want        wdmd.Verdict
	}{
		{100, 0, wdmd.Pass},
		{100, 111, wdmd.Pass},
		{100, 110, wdmd.Warning},
		{100, 101, wdmd.Warning},
		{100, 100, wdmd.Failed},
		{100, 5, wdmd.Failed},
		{0, 5, wdmd.Warning},
	} {
		require.Equal(t, tc.want, wdmd.Judge(tc.now, tc.expire, wdmd.WarnMargin), "now %d expire %d", tc.now, tc.expire)
	}
	// Dumb twin: the verdict by counting seconds.
	twin := func(now, expire uint64) wdmd.Verdict {
		if expire == 0 {
			return wdmd.Pass
		}
		if now >= expire {
			return wdmd.Failed
		}
		left := expire - now
		if left <= wdmd.WarnMargin {
			return wdmd.Warning
		}
		return wdmd.Pass
	}
	f := func(now, expire uint32) bool {
		return wdmd.Judge(uint64(now), uint64(expire), wdmd.WarnMargin) == twin(uint64(now), uint64(expire))
	}
	require.NoError(t, quick.Check(f, nil))
}

func TestEvaluate(t *testing.T) {
	ex := []wdmd.Expiry{{Slot: 2, Expire: 0}, {Slot: 3, Expire: 200}, {Slot: 4, Expire: 105}, {Slot: 5, Expire: 90}}
	fails, ping := wdmd.Evaluate(100, ex, 0, wdmd.WarnMargin)
	require.False(t, ping)
	require.Len(t, fails, 2)
	require.Equal(t, 4, fails[0].Slot)
	require.Equal(t, wdmd.Warning, fails[0].Verdict)
	require.Equal(t, 5, fails[1].Slot)
	require.Equal(t, wdmd.Failed, fails[1].Verdict)
	_, ping = wdmd.Evaluate(100, ex[:2], 0, wdmd.WarnMargin)
	require.True(t, ping)
	_, ping = wdmd.Evaluate(100, ex[:2], 1, wdmd.WarnMargin)
	require.False(t, ping, "a failing script blocks the ping")
}

func TestCandidates(t *testing.T) {
	require.Equal(t, []string{"/dev/watchdog0", "/dev/watchdog1", "/dev/watchdog"}, wdmd.Candidates(""))
	require.Equal(t, []string{"/dev/x", "/dev/watchdog0", "/dev/watchdog1", "/dev/watchdog"}, wdmd.Candidates("/dev/x"))
	require.Equal(t, []string{"/dev/watchdog1", "/dev/watchdog0", "/dev/watchdog"}, wdmd.Candidates("/dev/watchdog1"))
}

type lines []string

// logger records the error-level lines in l.
func (l *lines) logger() *zap.Logger {
	return zap.New(&recCore{add: func(lv zapcore.Level, s string) {
		if lv >= zapcore.ErrorLevel {
			*l = append(*l, s)
		}
	}})
}

// TestArm covers the selection rules of docs/wdmd.md "Device selection" with the emulated
// device: missing paths are skipped silently, a busy device is logged,
// a timeout other than 60 is set, a refused SetTimeout disarms.
func TestArm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clock.NewAt(base * time.Second)
		bank := testdev.NewBank(testdev.Options{Clock: clock, Paths: []string{"/dev/watchdog1", "/dev/watchdog"}, InitialTimeout: 30})
		busy, err := bank.Driver().Open("/dev/watchdog1")
		require.NoError(t, err)
		var log lines
		m := wdmd.New(wdmd.Config{Clock: clock, Driver: bank.Driver(), Log: log.logger(), FirstDevice: "/dev/none"})
		require.NoError(t, m.Arm())
		require.Equal(t, lines{"open /dev/watchdog1 error 16", "/dev/watchdog armed with fire_timeout 60"}, log)
		require.NoError(t, busy.Close())

		log = nil
		bank = testdev.NewBank(testdev.Options{Clock: clock, InitialTimeout: 30, RejectSetTimeout: true})
		m = wdmd.New(wdmd.Config{Clock: clock, Driver: bank.Driver(), Log: log.logger()})
		require.ErrorIs(t, m.Arm(), wdmd.ErrNoDevice)
		require.Equal(t, lines{
			"/dev/watchdog0 failed to set timeout", "/dev/watchdog0 disarmed",
			"/dev/watchdog1 failed to set timeout", "/dev/watchdog1 disarmed",
			"/dev/watchdog failed to set timeout", "/dev/watchdog disarmed",
			"no watchdog device, load a watchdog driver"}, log)
		for _, p := range wdmd.Candidates("") {
			require.False(t, bank.Armed(p))
		}
		bank.Stop()
	})
}

func TestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clock.NewAt(base * time.Second)
		bank := testdev.NewBank(testdev.Options{Clock: clock, Paths: []string{"/dev/watchdog"}, InitialTimeout: 30})
		var out, errb bytes.Buffer
		require.True(t, wdmd.Probe(bank.Driver(), "", 60, &out, &errb))
		require.Equal(t, "/dev/watchdog\n", out.String())
		require.Equal(t, "error 2 stat /dev/watchdog0\nerror 2 stat /dev/watchdog1\n", errb.String())
		require.False(t, bank.Armed("/dev/watchdog"))
		evs := bank.Events()
		require.Equal(t, testdev.SetTimeout, evs[2].Kind)
		require.Equal(t, testdev.CloseClean, evs[len(evs)-1].Kind)

		out.Reset()
		errb.Reset()
		bank = testdev.NewBank(testdev.Options{Clock: clock, Paths: []string{}})
		require.False(t, wdmd.Probe(bank.Driver(), "/dev/x", 60, &out, &errb))
		require.Empty(t, out.String())
		require.Equal(t, "error 2 stat /dev/x\nerror 2 stat /dev/watchdog0\nerror 2 stat /dev/watchdog1\nerror 2 stat /dev/watchdog\nno watchdog device, load a watchdog driver\n", errb.String())
	})
}

// TestDeviceRules checks the emulated device against the kernel rules
// it stands for.
func TestDeviceRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clock.NewAt(base * time.Second)
		bank := testdev.NewBank(testdev.Options{Clock: clock})
		drv := bank.Driver()
		wd, err := drv.Open("/dev/watchdog0")
		require.NoError(t, err)
		_, err = drv.Open("/dev/watchdog0")
		require.ErrorIs(t, err, unix.EBUSY)
		_, err = wd.Write([]byte("V"))
		require.NoError(t, err)
		_, err = wd.Write([]byte("x")) // a later write without V cancels the magic
		require.NoError(t, err)
		require.NoError(t, wd.Close())
		require.True(t, bank.Armed("/dev/watchdog0"))
		time.Sleep(59 * time.Second)
		wd, err = drv.Open("/dev/watchdog0") // reopen pings
		require.NoError(t, err)
		time.Sleep(59 * time.Second)
		_, fired := bank.FireEvent()
		require.False(t, fired)
		time.Sleep(2 * time.Second)
		ev, fired := bank.FireEvent()
		require.True(t, fired)
		require.Equal(t, 1000+59+60*time.Second/time.Second, ev.At/time.Second)
		require.ErrorIs(t, errors.Join(wd.Close()), nil)
		bank.Stop()
	})
}

// TestDump checks the dump lines (docs/wdmd.md "Dump") and slot reuse.
func TestDump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := startWorld(t, wdmd.Config{Pid: 18705, SocketGID: 105}, testdev.Options{})
		w.sleepUntil(1002, 0)
		c1 := newConn(8, 18748)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c1}
		var r wdmd.Record
		r.Cmd = wdmd.CmdRegister
		_ = r.SetName("sanlock_LS:1")
		w.send(c1, r)
		w.send(c1, wdmd.Record{Cmd: wdmd.CmdRefcountSet})
		w.send(c1, wdmd.Record{Cmd: wdmd.CmdTestLive, RenewalTime: 1002, ExpireTime: 1018})
		w.sleepUntil(1003, 0)
		c2 := newConn(9, 1)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c2}
		w.send(c2, wdmd.Record{Cmd: wdmd.CmdDumpDebug})
		require.Equal(t, "wdmd 18705 socket_gid 105 high_priority 0 now 1003 last_keepalive 1002 last_closeunclean 0 allow_scripts 0 kill_script_sec 0 fire_timeout 60 identity \"\"\n"+
			"client 0 name signal pid 0 fd 5 dead 0 ref 0 now 1003 renewal 0 expire 0\n"+
			"client 1 name listen pid 0 fd 6 dead 0 ref 0 now 1003 renewal 0 expire 0\n"+
			"client 2 name sanlock_LS:1 pid 18748 fd 8 dead 0 ref 1 now 1003 renewal 1002 expire 1018\n"+
			"client 3 name dump pid 0 fd 9 dead 0 ref 0 now 1003 renewal 0 expire 0\n", string(<-c2.replies))
		w.events <- wdmd.Event{Kind: wdmd.EvHangup, Conn: c2}
		c3 := newConn(10, 1)
		w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c3}
		w.send(c3, wdmd.Record{Cmd: wdmd.CmdStatus, Magic: 77})
		var st wdmd.Record
		require.NoError(t, st.Unmarshal(<-c3.replies))
		require.Equal(t, wdmd.Record{Cmd: wdmd.CmdStatus, Magic: 77, TestInterval: 10, FireTimeout: 60, LastKeepalive: 1002}, st)
		require.Contains(t, w.mon.Dump(), "client 3 name  pid 0 fd 10 dead 0 ref 0") // slot 3 reused
		// an unknown command closes that connection only
		w.send(c3, wdmd.Record{Cmd: 8})
		w.send(c1, wdmd.Record{Cmd: wdmd.CmdTestLive})
		w.sleepUntil(1004, 0)
		require.True(t, c3.isClosed())
		require.False(t, c1.isClosed())
		require.Contains(t, w.log.errors(), "1003 ci 3 unknown cmd 8")
		require.NoError(t, w.stop())
	})
}

// fakeRunner is a ScriptRunner over scripted outcomes on fake time.
type fakeRunner struct {
	clock   wdmd.Clock
	entries []wdmd.ScriptEntry
	// behaviour per script name: run time and exit code (-1: killed by 9)
	run     map[string]time.Duration
	code    map[string]int
	started map[int]string
	startAt map[int]time.Duration
	killed  map[int]bool
	nextPid int
	starts  []string
}

func (f *fakeRunner) ReadDir(string) ([]wdmd.ScriptEntry, error) {
	e := append([]wdmd.ScriptEntry(nil), f.entries...)
	sort.Slice(e, func(i, j int) bool { return e[i].Name < e[j].Name })
	return e, nil
}
func (f *fakeRunner) Check(string) error { return nil }
func (f *fakeRunner) Start(path string) (int, error) {
	f.nextPid++
	name := path[len("/etc/wdmd.d/"):]
	f.started[f.nextPid] = name
	f.startAt[f.nextPid] = f.clock.Now()
	f.starts = append(f.starts, sprintf("%d %s", uint64(f.clock.Now()/time.Second), name))
	return f.nextPid, nil
}
func (f *fakeRunner) Reap(pid int) (bool, wdmd.ScriptStatus) {
	if f.killed[pid] {
		return true, wdmd.ScriptStatus{Signaled: true, Signal: 9}
	}
	name := f.started[pid]
	if f.clock.Now()-f.startAt[pid] < f.run[name] {
		return false, wdmd.ScriptStatus{}
	}
	return true, wdmd.ScriptStatus{Exited: true, Code: f.code[name]}
}
func (f *fakeRunner) Kill(pid int) { f.killed[pid] = true }

// TestScripts: script tests (docs/wdmd.md "Script tests"): a passing script is rerun at
// most every 9 s, a failing one blocks the ping, a slow one is reported
// as taking too long and killed after -k seconds.
func TestScripts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clock.NewAt(base * time.Second)
		fr := &fakeRunner{clock: clock,
			entries: []wdmd.ScriptEntry{{Name: "b-fail", Regular: true, OwnerExec: true}, {Name: "a-ok", Regular: true, OwnerExec: true},
				{Name: ".hidden", Regular: true, OwnerExec: true}, {Name: "noexec", Regular: true}, {Name: "c-slow", Regular: true, OwnerExec: true}},
			run:     map[string]time.Duration{"a-ok": 500 * time.Millisecond, "b-fail": time.Second, "c-slow": 30 * time.Second},
			code:    map[string]int{"b-fail": 3},
			started: map[int]string{}, startAt: map[int]time.Duration{}, killed: map[int]bool{}}
		w := startWorldScripts(t, clock, fr)
		w.sleepUntil(1035, 0)
		require.NoError(t, w.stop())
		errs := w.log.errors()
		require.Equal(t, "1000 add_script 0 a-ok", errs[0])
		require.Equal(t, "1000 add_script 1 b-fail", errs[1])
		require.Equal(t, "1000 add_script 2 c-slow", errs[2])
		require.Contains(t, errs, "1011 script b-fail pid 2 exit status 3")
		require.Contains(t, errs, "1011 script b-fail last_result 3 start 1010 run 1 fail 1 good 0 kill 0 long 0")
		require.Contains(t, errs, "1019 script c-slow pid 3 start 1010 now 1019 taking too long")
		require.Contains(t, errs, "1023 script c-slow pid 3 term signal 9") // -k 12: killed at 1022, reaped at the next check
		// a-ok, once passed, is rerun only 9 s later; c-slow is not restarted while it runs
		require.Equal(t, []string{"1010 a-ok", "1010 b-fail", "1010 c-slow", "1019 b-fail", "1024 a-ok", "1024 b-fail", "1024 c-slow", "1033 b-fail"}, fr.starts)
		_, fired := w.bank.FireEvent()
		require.False(t, fired)
		require.Contains(t, errs, "1019 /dev/watchdog0 closed unclean")
	})
}

func startWorldScripts(t *testing.T, clock *clock.System, fr *fakeRunner) *world {
	w := &world{t: t, clock: clock, bank: testdev.NewBank(testdev.Options{Clock: clock, Paths: []string{"/dev/watchdog0"}}),
		events: make(chan wdmd.Event), done: make(chan error, 1)}
	w.log = &recLogger{clock: clock}
	w.mon = wdmd.New(wdmd.Config{Clock: clock, Driver: w.bank.Driver(), Log: w.log.logger(), Scripts: fr, AllowScripts: true, KillScriptSec: 12})
	require.NoError(t, w.mon.Arm())
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.mon.Run(ctx, w.events) }()
	return w
}
