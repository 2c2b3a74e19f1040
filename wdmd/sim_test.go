package wdmd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/internal/sanlog"
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// This file has the harness for running a whole Monitor with an emulated
// device and emulated sanlock lockspaces inside a testing/synctest bubble.

const base = 1000 // monotonic seconds at the start of every simulation

// logLine is one wdmd log line with the (whole-second) time it was logged.
type logLine struct {
	at    uint64
	debug bool
	msg   string
}

type recLogger struct {
	mu    sync.Mutex
	clock wdmd.Clock
	lines []logLine
}

func (l *recLogger) add(lv zapcore.Level, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, logLine{uint64(l.clock.Now() / time.Second), lv < zapcore.ErrorLevel, text})
}

// logger is the *zap.Logger that records into l.
func (l *recLogger) logger() *zap.Logger { return zap.New(&recCore{add: l.add}) }

// recCore is a zap core handing each entry, as the line format prints it
// (message, then key=value fields), to add.
type recCore struct {
	add    func(zapcore.Level, string)
	fields []zapcore.Field
}

func (c *recCore) Enabled(zapcore.Level) bool { return true }
func (c *recCore) With(f []zapcore.Field) zapcore.Core {
	return &recCore{add: c.add, fields: append(append([]zapcore.Field(nil), c.fields...), f...)}
}
func (c *recCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c *recCore) Write(e zapcore.Entry, f []zapcore.Field) error {
	c.add(e.Level, sanlog.Text(e.Message, append(append([]zapcore.Field(nil), c.fields...), f...)))
	return nil
}
func (c *recCore) Sync() error { return nil }

// errors returns the non-debug lines as "<sec> <msg>".
func (l *recLogger) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.lines {
		if !x.debug {
			out = append(out, fmt.Sprintf("%d %s", x.at, x.msg))
		}
	}
	return out
}

// fakeConn is a socket connection inside the bubble.
type fakeConn struct {
	fd, pid int
	replies chan []byte
	mu      sync.Mutex
	closed  bool
}

func newConn(fd, pid int) *fakeConn {
	return &fakeConn{fd: fd, pid: pid, replies: make(chan []byte, 16)}
}
func (c *fakeConn) Fd() int               { return c.fd }
func (c *fakeConn) PeerPid() (int, error) { return c.pid, nil }
func (c *fakeConn) Send(b []byte) error {
	c.replies <- append([]byte(nil), b...)
	return nil
}
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// world is one emulated host: a clock, a device bank and a running
// Monitor fed through events.
type world struct {
	t      *testing.T
	clock  *clock.System
	bank   *testdev.Bank
	log    *recLogger
	mon    *wdmd.Monitor
	events chan wdmd.Event
	cancel context.CancelFunc
	done   chan error
}

// startWorld must run inside a synctest bubble. The device is armed at
// start (Arm, wdmd 3.8.5).
func startWorld(t *testing.T, cfg wdmd.Config, opts testdev.Options) *world {
	t.Helper()
	return startWorldMode(t, cfg, opts, false)
}

// startLazyWorld is startWorld with the device opened on demand (Select,
// wdmd 3.9 and later).
func startLazyWorld(t *testing.T, cfg wdmd.Config, opts testdev.Options) *world {
	t.Helper()
	return startWorldMode(t, cfg, opts, true)
}

func startWorldMode(t *testing.T, cfg wdmd.Config, opts testdev.Options, lazy bool) *world {
	t.Helper()
	clock := clock.NewAt(base * time.Second)
	opts.Clock = clock
	if opts.Paths == nil {
		opts.Paths = []string{"/dev/watchdog0"}
	}
	w := &world{t: t, clock: clock, bank: testdev.NewBank(opts), events: make(chan wdmd.Event), done: make(chan error, 1)}
	w.log = &recLogger{clock: clock}
	cfg.Clock, cfg.Driver, cfg.Log = clock, w.bank.Driver(), w.log.logger()
	w.mon = wdmd.New(cfg)
	w.mon.AddInternal("signal", 5)
	w.mon.AddInternal("listen", 6)
	if lazy {
		require.NoError(t, w.mon.Select())
	} else {
		require.NoError(t, w.mon.Arm())
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.mon.Run(ctx, w.events) }()
	return w
}

func (w *world) now() uint64 { return uint64(w.clock.Now() / time.Second) }

// sleepUntil sleeps until monotonic second sec (plus frac seconds).
func (w *world) sleepUntil(sec uint64, frac time.Duration) {
	at := time.Duration(sec)*time.Second + frac
	if d := at - w.clock.Now(); d > 0 {
		time.Sleep(d)
	}
}

// stop ends the monitor like a killed process (if it still runs) and
// stops the device timers.
func (w *world) stop() error {
	err := w.kill()
	w.bank.Stop()
	return err
}

// kill ends the monitor like a killed process; the device keeps its
// timer. It returns Run's result if Run had already ended by itself.
func (w *world) kill() error {
	w.cancel()
	err := <-w.done
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (w *world) send(c *fakeConn, r wdmd.Record) {
	w.events <- wdmd.Event{Kind: wdmd.EvRecord, Conn: c, Record: r}
}

// lockspace emulates one sanlock lockspace (docs/wdmd.md "sanlock side"): connect,
// register, refcount, status, test_live(L, L+8*io), then test_live after
// each successful renewal every 2*io seconds while renewals succeed.
type lockspace struct {
	name      string
	pid       int
	io        uint64
	connect   uint64 // second of the connect (+0.25); 0: join-3
	join      uint64 // second of the acquire (L0); activation at join+0.25
	lastOK    uint64 // renewals at join+2io*k succeed while <= lastOK
	deactAt   uint64 // if set: test_live(0,0) + refcount clear at this second + 0.5
	hangupAt  uint64 // if set: the connection ends (sanlock killed) at this second + 0.75
	fire      int    // if set: OPEN_WATCHDOG with this timeout right after the connect (sanlock 3.9+)
	opened    int    // its answer
	renewals  []uint64
	status    wdmd.Record
	conn      *fakeConn
	lastRenew uint64
}

func (w *world) runLockspace(ls *lockspace, fd int) {
	if ls.connect == 0 {
		ls.connect = ls.join - 3
	}
	w.sleepUntil(ls.connect, 250*time.Millisecond)
	c := newConn(fd, ls.pid)
	ls.conn = c
	w.events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: c}
	if ls.fire != 0 {
		w.send(c, wdmd.Record{Cmd: wdmd.CmdOpenWatchdog, FireTimeout: uint32(ls.fire)})
		var r wdmd.Record
		require.NoError(w.t, r.Unmarshal(<-c.replies))
		ls.opened = int(r.FireTimeout)
	}
	w.sleepUntil(ls.join, 250*time.Millisecond)
	var r wdmd.Record
	r.Cmd = wdmd.CmdRegister
	require.NoError(w.t, r.SetName(ls.name))
	w.send(c, r)
	w.send(c, wdmd.Record{Cmd: wdmd.CmdRefcountSet})
	w.send(c, wdmd.Record{Cmd: wdmd.CmdStatus})
	require.NoError(w.t, ls.status.Unmarshal(<-c.replies))
	L := ls.join
	w.send(c, wdmd.Record{Cmd: wdmd.CmdTestLive, RenewalTime: L, ExpireTime: L + 8*ls.io})
	ls.lastRenew = L
	for next := L + 2*ls.io; ; next += 2 * ls.io {
		stopAt := min(nz(ls.deactAt), nz(ls.hangupAt))
		if next > ls.lastOK || next >= stopAt {
			break
		}
		w.sleepUntil(next, 600*time.Millisecond)
		w.send(c, wdmd.Record{Cmd: wdmd.CmdTestLive, RenewalTime: next, ExpireTime: next + 8*ls.io})
		ls.lastRenew = next
		ls.renewals = append(ls.renewals, next)
	}
	if ls.deactAt != 0 {
		w.sleepUntil(ls.deactAt, 500*time.Millisecond)
		w.send(c, wdmd.Record{Cmd: wdmd.CmdTestLive})
		w.send(c, wdmd.Record{Cmd: wdmd.CmdRefcountClear})
	}
	if ls.hangupAt != 0 {
		w.sleepUntil(ls.hangupAt, 750*time.Millisecond)
		w.events <- wdmd.Event{Kind: wdmd.EvHangup, Conn: c}
	}
}

func nz(v uint64) uint64 {
	if v == 0 {
		return ^uint64(0)
	}
	return v
}

// pingSeconds are the whole seconds of every event that pinged the device.
func pingSeconds(evs []testdev.Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		if e.Pings() {
			out = append(out, uint64(e.At/time.Second))
		}
	}
	return out
}

func eventsOf(evs []testdev.Event, k testdev.Kind) []testdev.Event {
	var out []testdev.Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func seq(from, to, step uint64) []uint64 {
	var out []uint64
	for v := from; v <= to; v += step {
		out = append(out, v)
	}
	return out
}
