package wdmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Conn is one accepted socket connection as the Monitor sees it.
type Conn interface {
	// Fd is the descriptor shown by the dump (any stable number).
	Fd() int
	// PeerPid is the peer's pid (SO_PEERCRED), read at REGISTER.
	PeerPid() (int, error)
	// Send writes a reply. It must not block for long.
	Send(b []byte) error
	// Close closes the connection; no more events follow for it after a
	// Hangup event has been handled.
	Close() error
}

// Signal is a signal delivered to the daemon.
type Signal int

const (
	SigTerm Signal = iota + 1
	SigInt
	SigHup
)

// EventKind tells what an Event carries.
type EventKind int

const (
	// EvAccept: a new connection (Conn).
	EvAccept EventKind = iota + 1
	// EvRecord: one complete record received on Conn.
	EvRecord
	// EvHangup: Conn reached end of file, or a read error or a partial
	// record. Every complete record received before it comes first.
	EvHangup
	// EvSignal: Signal was received.
	EvSignal
)

// Event is one input of the event loop.
type Event struct {
	Kind   EventKind
	Conn   Conn
	Record Record
	Signal Signal
}

// Config is everything a Monitor needs. Zero numbers mean the 3.8.5
// defaults.
type Config struct {
	Driver Driver
	Clock  Clock
	// Log receives wdmd's log lines (nil: none): error level for the
	// syslog messages, debug for the ones 3.8.5 prints only with -D. The
	// messages keep wdmd 3.8.5's text, values inline, since syslog
	// watchers and the side-by-side tests match it (docs/wdmd.md).
	Log     *zap.Logger
	Scripts ScriptRunner // required when AllowScripts is set

	FirstDevice string // -w: device path tried first
	// TestInterval fixes the seconds between passing tests (tests only).
	// 0: it follows the device timeout in force (IntervalFor: 10 at 60 s).
	TestInterval int
	// FireTimeout is the device timeout of Arm (3.8.5 mode) and the one
	// set for a client that registers without OPEN_WATCHDOG (a sanlock
	// 3.8.5, which requires 60). 0: 60.
	FireTimeout   int
	AllowScripts  bool   // -S 1
	ScriptDir     string // -s
	KillScriptSec int    // -k

	// GridOnly runs tests only every test interval, exactly like wdmd
	// 3.8.5. By default a test also runs as soon as a client enters its
	// warning margin (expire-10) while the device is open, so the last
	// ping is never later than max(expire-10, time of the TEST_LIVE):
	// with 3.8.5's grid it can be up to one interval later, which lets an
	// io_timeout 1 lockspace's host fire after host_dead_seconds (see
	// docs/wdmd.md).
	GridOnly bool
	// TraceRecords logs every received record as a debug line.
	TraceRecords bool

	// Shown by the dump only.
	Pid          int
	SocketGID    int
	HighPriority int
}

// ErrUnknownCommand is returned by Receive for a record whose command is
// not one of 1..7. wdmd ignores such records without a reply; we close
// the connection instead (a client waiting for a reply would otherwise
// hang, and random input is refused early).
var ErrUnknownCommand = errors.New("wdmd: unknown command")

// slot is one entry of the client table (the dump's "client <n>").
type slot struct {
	used     bool
	internal bool // the dump's "signal" and "listen" entries
	// opener: sent OPEN_WATCHDOG (a sanlock 3.9 or later). A client that
	// registers without it is a sanlock 3.8.5, for which the device is
	// opened at REGISTER (openForLegacy).
	opener  bool
	name    [NameSize]byte
	pid     int
	fd      int
	dead    bool
	ref     bool
	renewal uint64
	expire  uint64
	conn    Conn
}

// Monitor is the state of one wdmd daemon. All methods must be called
// from one goroutine (Run's, or a test's).
type Monitor struct {
	cfg     Config
	log     *zap.Logger
	clock   Clock
	dev     *device
	slots   []*slot
	byConn  map[Conn]int
	scripts []*script

	interval uint64 // current test interval
	normal   uint64 // interval while passing
	margin   uint64
	testTime uint64
	quit     bool
	// lazy: the device is opened when a client needs it and closed when
	// the last client goes (wdmd 3.9 and later; Select). Without it the
	// device is armed from the start and stays open (Arm, wdmd 3.8.5).
	lazy bool
}

// IntervalFor is the test interval for a device timeout of fire seconds,
// as wdmd 3.9 and later choose it: 10 s at 60 s and more, 5 s from 30 s,
// 2 s from 10 s, else 1 s. wdmd 3.9.5 also warns a client from its expiry
// minus this (measured black-box); our margin is marginFor.
func IntervalFor(fire int) uint64 {
	switch {
	case fire >= 60:
		return 10
	case fire >= 30:
		return 5
	case fire >= 10:
		return 2
	}
	return 1
}

// New returns a Monitor with the given configuration. It scans the
// scripts directory when scripts are allowed; the device is found by
// Select (opened on demand) or armed at once by Arm.
func New(cfg Config) *Monitor {
	if cfg.FireTimeout <= 0 {
		cfg.FireTimeout = DefaultFireTimeout
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.ScriptDir == "" {
		cfg.ScriptDir = "/etc/wdmd.d"
	}
	m := &Monitor{
		cfg:    cfg,
		log:    cfg.Log,
		clock:  cfg.Clock,
		byConn: map[Conn]int{},
	}
	m.setTiming(cfg.FireTimeout)
	if cfg.AllowScripts {
		m.scanScripts()
	}
	return m
}

// marginFor is the warning margin for a device timeout of fire seconds:
// the test interval, but at least 2 s. The last ping is then at the
// latest at expire-margin+1 (tests run on whole seconds), so the device
// fires at least 1 s before host_dead_seconds (expire + fire); with
// wdmd 3.9.5's 1-s margin below 10 s it could fire at that very second.
func marginFor(fire int) uint64 { return max(IntervalFor(fire), 2) }

// setTiming makes the test interval and the warning margin follow a
// device timeout of fire seconds (a fixed Config.TestInterval wins).
func (m *Monitor) setTiming(fire int) {
	m.margin = marginFor(fire)
	m.normal = IntervalFor(fire)
	if m.cfg.TestInterval > 0 {
		m.normal = uint64(m.cfg.TestInterval)
	}
	m.interval = m.normal
}

// Select finds the watchdog device at start without arming it, as wdmd
// 3.9 and later do (docs/wdmd.md "Opening the device on demand"): the
// device is opened by the first OPEN_WATCHDOG, or by the REGISTER of a
// client that never sent one, and closed with the magic close when the
// last client goes. It fails with ErrNoDevice when no candidate works.
func (m *Monitor) Select() error {
	d, err := selectDevice(m.cfg.Driver, Candidates(m.cfg.FirstDevice), m.cfg.FireTimeout, m.log)
	if err != nil {
		return err
	}
	m.dev = d
	m.lazy = true
	return nil
}

// Device is the path of the selected device and the name its driver
// gives ("" when it gives none, or before Select or Arm).
func (m *Monitor) Device() (path, identity string) {
	if m.dev == nil {
		return "", ""
	}
	return m.dev.path, m.dev.identity
}

// openWatchdog answers OPEN_WATCHDOG asking for fire seconds: with the
// device armed (open, or closed unclean while a failure counts down) the
// timeout in force, else the device is opened with fire seconds; 0 when
// it cannot be. Opening runs a test at once (the next Test call).
func (m *Monitor) openWatchdog(fire int) int {
	if m.dev == nil {
		return 0
	}
	if m.dev.armed() {
		return m.dev.fire
	}
	if fire <= 0 {
		return 0
	}
	t, err := m.dev.open(fire, seconds(m.clock))
	if err != nil {
		return 0
	}
	m.setTiming(t)
	m.testTime = 0
	return t
}

// openForLegacy arms the device for slot s, a client that did not send
// OPEN_WATCHDOG (sanlock 3.8.5 expects the device armed with 60 s from
// wdmd's start): the device is opened with Config.FireTimeout, unless it
// is armed already. A failure shows in the STATUS answer (fire_timeout
// 0), which makes that sanlock fail its add_lockspace with -203.
func (m *Monitor) openForLegacy(ci int, s *slot) {
	if s.opener || m.dev == nil || m.dev.armed() {
		return
	}
	t := m.openWatchdog(m.cfg.FireTimeout)
	m.log.Error(fmt.Sprintf("open_watchdog for ci %d pid %d without open_watchdog fire_timeout %d result %d",
		ci, s.pid, m.cfg.FireTimeout, t))
}

// closeIfUnused disarms an open device with the magic close once no
// client is left (no connection, no dead slot), as wdmd 3.9 does. A
// device closed unclean is left to the test loop, which reopens it when
// every client passes and then comes here.
func (m *Monitor) closeIfUnused() {
	if !m.lazy || m.dev == nil || m.dev.wd == nil {
		return
	}
	for _, s := range m.slots {
		if s.used && !s.internal {
			return
		}
	}
	m.log.Error("close watchdog unused")
	m.dev.closeClean()
}

// AddInternal adds a slot that is not a client (upstream's "signal" and
// "listen" poll entries, which the dump lists).
func (m *Monitor) AddInternal(name string, fd int) int {
	i := m.newSlot(fd)
	copy(m.slots[i].name[:], name)
	m.slots[i].internal = true
	return i
}

func (m *Monitor) newSlot(fd int) int {
	for i, s := range m.slots {
		if !s.used {
			*s = slot{used: true, fd: fd}
			return i
		}
	}
	m.slots = append(m.slots, &slot{used: true, fd: fd})
	return len(m.slots) - 1
}

// Accept adds a new connection.
func (m *Monitor) Accept(c Conn) int {
	i := m.newSlot(c.Fd())
	m.slots[i].conn = c
	m.byConn[c] = i
	return i
}

// Receive applies one record received on c. A reply, if any, is sent on
// c. ErrUnknownCommand means the caller should hang up c.
func (m *Monitor) Receive(c Conn, r *Record) error {
	ci, ok := m.byConn[c]
	if !ok {
		return fmt.Errorf("wdmd: record on unknown connection")
	}
	s := m.slots[ci]
	if m.cfg.TraceRecords {
		m.log.Debug("recv", zap.Int("ci", ci), zap.Uint32("magic", r.Magic), zap.Uint32("cmd", r.Cmd), zap.Uint32("len", r.Len),
			zap.Uint32("flags", r.Flags), zap.Uint32("test_interval", r.TestInterval), zap.Uint32("fire_timeout", r.FireTimeout),
			zap.Uint64("last_keepalive", r.LastKeepalive), zap.Uint64("renewal", r.RenewalTime), zap.Uint64("expire", r.ExpireTime),
			zap.String("name", r.NameString()))
	}
	switch r.Cmd {
	case CmdRegister:
		pid, err := c.PeerPid()
		if err != nil {
			m.Hangup(c)
			return err
		}
		s.pid = pid
		s.name = r.Name
		m.log.Debug(fmt.Sprintf("register ci %d fd %d pid %d %s", ci, s.fd, pid, cString(s.name[:])))
		m.openForLegacy(ci, s)
	case CmdRefcountSet:
		s.ref = true
		m.openForLegacy(ci, s)
	case CmdRefcountClear:
		s.ref = false
	case CmdTestLive:
		s.renewal = r.RenewalTime
		s.expire = r.ExpireTime
		m.log.Debug(fmt.Sprintf("test_live ci %d renewal %d expire %d", ci, s.renewal, s.expire))
		if s.expire != 0 {
			m.openForLegacy(ci, s)
		}
	case CmdOpenWatchdog:
		s.opener = true
		t := m.openWatchdog(int(r.FireTimeout))
		m.log.Error(fmt.Sprintf("open_watchdog fire_timeout %d result %d", r.FireTimeout, t))
		reply := *r
		reply.FireTimeout = uint32(t)
		if err := c.Send(reply.Marshal()); err != nil {
			m.Hangup(c)
			return err
		}
	case CmdStatus:
		reply := *r
		reply.TestInterval = uint32(m.interval)
		reply.FireTimeout = uint32(m.cfg.FireTimeout)
		if m.dev != nil {
			// The timeout in force; 0 while the device is not armed, so
			// that a sanlock 3.8.5 (which requires 60) does not join
			// without protection.
			reply.FireTimeout = 0
			if m.dev.armed() {
				reply.FireTimeout = uint32(m.dev.fire)
			}
			reply.LastKeepalive = m.dev.lastKeepalive
		}
		if err := c.Send(reply.Marshal()); err != nil {
			m.Hangup(c)
			return err
		}
	case CmdDumpDebug:
		s.name = [NameSize]byte{}
		copy(s.name[:], "dump")
		if err := c.Send([]byte(m.Dump())); err != nil {
			m.Hangup(c)
			return err
		}
	default:
		m.log.Error(fmt.Sprintf("ci %d unknown cmd %d", ci, r.Cmd))
		m.Hangup(c)
		return ErrUnknownCommand
	}
	return nil
}

// Hangup handles the loss of c (docs/wdmd.md "Connection loss"): a slot without expiry is
// freed; a slot with an expiry stays, dead, with its refcount and expiry,
// and keeps being tested.
func (m *Monitor) Hangup(c Conn) {
	ci, ok := m.byConn[c]
	if !ok {
		return
	}
	delete(m.byConn, c)
	_ = c.Close()
	s := m.slots[ci]
	if s.expire == 0 {
		*s = slot{}
		m.log.Debug(fmt.Sprintf("client_pid_dead ci %d", ci))
		m.closeIfUnused()
		return
	}
	m.log.Error(fmt.Sprintf("client dead ci %d fd %d pid %d renewal %d expire %d %s",
		ci, s.fd, s.pid, s.renewal, s.expire, cString(s.name[:])))
	s.fd = -1
	s.dead = true
	s.conn = nil
}

// Signal applies a signal: SIGTERM and SIGINT request the quit only if no
// slot has a refcount at this moment (otherwise they are dropped); SIGHUP
// rescans the scripts directory.
func (m *Monitor) Signal(sig Signal) {
	switch sig {
	case SigTerm, SigInt:
		if !m.anyRef() {
			m.quit = true
		}
	case SigHup:
		if m.cfg.AllowScripts {
			m.scanScripts()
		}
	}
}

func (m *Monitor) anyRef() bool {
	for _, s := range m.slots {
		if s.used && s.ref {
			return true
		}
	}
	return false
}

// Quitting reports whether the loop should end now: a quit was requested
// and no slot has a refcount.
func (m *Monitor) Quitting() bool { return m.quit && !m.anyRef() }

// Handle applies one event.
func (m *Monitor) Handle(ev Event) {
	switch ev.Kind {
	case EvAccept:
		m.Accept(ev.Conn)
	case EvRecord:
		_ = m.Receive(ev.Conn, &ev.Record)
	case EvHangup:
		m.Hangup(ev.Conn)
	case EvSignal:
		m.Signal(ev.Signal)
	}
}

// Expiries returns the expiry of every used slot, dead ones included.
func (m *Monitor) Expiries() []Expiry {
	var out []Expiry
	for i, s := range m.slots {
		if s.used && s.expire != 0 {
			out = append(out, Expiry{Slot: i, Pid: s.pid, Name: cString(s.name[:]), Renewal: s.renewal, Expire: s.expire})
		}
	}
	return out
}

// Ping pings the device once; Run does it on entry.
func (m *Monitor) Ping() {
	if m.dev != nil && m.dev.isOpen() {
		m.dev.ping(seconds(m.clock))
	}
}

// Test runs a test if the test interval has passed since the last one
// (docs/wdmd.md "Test loop" step 4) and returns how long the loop may wait for events
// before calling Test again.
func (m *Monitor) Test(ctx context.Context) time.Duration {
	now := seconds(m.clock)
	if now-m.testTime >= m.interval || m.warnDue(now) {
		m.testTime = now
		m.log.Debug(fmt.Sprintf("test_time %d", now))
		scriptFails := 0
		if m.cfg.AllowScripts && len(m.scripts) > 0 {
			scriptFails = m.testScripts(ctx, now)
			now = seconds(m.clock)
		}
		fails, ping := Evaluate(now, m.Expiries(), scriptFails, m.margin)
		m.logFailures(now, fails)
		switch {
		case ping && m.dev != nil && m.dev.unclean:
			m.dev.reopen(now)
			m.interval = m.normal
			m.closeIfUnused()
		case ping:
			if m.dev != nil && m.dev.isOpen() {
				m.dev.ping(now)
			}
			m.interval = m.normal
		default:
			if m.dev != nil {
				m.dev.closeUnclean(now)
			}
			m.interval = RecoveryTestInterval
		}
	}
	next := m.testTime + m.interval
	if w, ok := m.nextWarn(now); ok && w < next {
		next = w
	}
	sleep := int64(next) - int64(now)
	wait := time.Duration(sleep) * time.Second
	if sleep <= 0 {
		wait = 500 * time.Millisecond
	}
	m.log.Debug(fmt.Sprintf("test_interval %d sleep_seconds %d poll_timeout %d", m.interval, sleep, wait.Milliseconds()))
	return wait
}

// warnDue says whether an early test is due: the device is open (no test
// is failing) and a client has entered its warning margin.
func (m *Monitor) warnDue(now uint64) bool {
	if m.cfg.GridOnly || m.dev == nil || !m.dev.isOpen() {
		return false
	}
	for _, s := range m.slots {
		if s.used && s.expire != 0 && Judge(now, s.expire, m.margin) != Pass {
			return true
		}
	}
	return false
}

// nextWarn is the earliest future second at which a client enters its
// warning margin.
func (m *Monitor) nextWarn(now uint64) (uint64, bool) {
	if m.cfg.GridOnly {
		return 0, false
	}
	var next uint64
	found := false
	for _, s := range m.slots {
		if !s.used || s.expire <= now+m.margin {
			continue
		}
		if w := s.expire - m.margin; !found || w < next {
			next, found = w, true
		}
	}
	return next, found
}

func (m *Monitor) logFailures(now uint64, fails []Failure) {
	if len(fails) == 0 {
		return
	}
	var ka, cu uint64
	if m.dev != nil {
		ka, cu = m.dev.lastKeepalive, m.dev.lastCloseUnclean
	}
	lastPing := max(ka, cu)
	for _, f := range fails {
		if f.Verdict == Failed {
			fire := m.cfg.FireTimeout
			if m.dev != nil {
				fire = m.dev.fire
			}
			rem := int64(fire) - (int64(now) - int64(lastPing))
			m.log.Error(fmt.Sprintf("test failed rem %d now %d ping %d close %d renewal %d expire %d client %d %s",
				rem, now, ka, cu, f.Renewal, f.Expire, f.Pid, f.Name))
		} else {
			m.log.Error(fmt.Sprintf("test warning now %d ping %d close %d renewal %d expire %d client %d %s",
				now, ka, cu, f.Renewal, f.Expire, f.Pid, f.Name))
		}
	}
}

// Run is the event loop (docs/wdmd.md "Test loop"): it pings once, then handles events
// and runs tests until a quit is accepted, and finally closes the device
// cleanly unless it is closed unclean (then the device stays armed and
// will fire). If ctx ends first, Run returns ctx.Err() after closing the
// device without the magic, as a killed process would.
func (m *Monitor) Run(ctx context.Context, events <-chan Event) error {
	m.Ping()
	wait := time.Duration(m.normal) * time.Second
	for {
		select {
		case ev := <-events:
			m.Handle(ev)
			m.drain(events)
		case <-m.clock.After(wait):
		case <-ctx.Done():
			if m.dev != nil && m.dev.isOpen() {
				_ = m.dev.wd.Close()
				m.dev.wd = nil
			}
			return ctx.Err()
		}
		if m.Quitting() {
			break
		}
		wait = m.Test(ctx)
	}
	m.Close()
	return nil
}

// drain handles the events that are already queued, like one poll round.
func (m *Monitor) drain(events <-chan Event) {
	for {
		select {
		case ev := <-events:
			m.Handle(ev)
		default:
			return
		}
	}
}

// Close ends the daemon's use of the device: a magic close, or, if the
// device is closed unclean, nothing (it stays armed and fires).
func (m *Monitor) Close() {
	if m.dev != nil {
		m.dev.closeClean()
	}
	for c := range m.byConn {
		_ = c.Close()
	}
}

// Dump is the text of the DUMP_DEBUG reply (docs/wdmd.md "Dump").
func (m *Monitor) Dump() string {
	now := seconds(m.clock)
	var ka, cu uint64
	if m.dev != nil {
		ka, cu = m.dev.lastKeepalive, m.dev.lastCloseUnclean
	}
	var b strings.Builder
	line := func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		if len(l) > 255 {
			l = l[:255]
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	fire, identity := m.cfg.FireTimeout, ""
	if m.dev != nil {
		fire, identity = m.dev.fire, m.dev.identity
	}
	line("wdmd %d socket_gid %d high_priority %d now %d last_keepalive %d last_closeunclean %d allow_scripts %d kill_script_sec %d fire_timeout %d identity \"%s\"",
		m.cfg.Pid, m.cfg.SocketGID, m.cfg.HighPriority, now, ka, cu, b2i(m.cfg.AllowScripts), m.cfg.KillScriptSec, fire, identity)
	for i, s := range m.scripts {
		if s.name == "" {
			continue
		}
		line("script %d name %.64s pid %d now %d start %d last_result %d run %d fail %d good %d kill %d long %d",
			i, s.name, s.pid, now, s.start, s.lastResult, s.runCount, s.failCount, s.goodCount, s.killCount, s.longCount)
	}
	for i, s := range m.slots {
		if !s.used {
			continue
		}
		line("client %d name %.64s pid %d fd %d dead %d ref %d now %d renewal %d expire %d",
			i, cString(s.name[:]), s.pid, s.fd, b2i(s.dead), b2i(s.ref), now, s.renewal, s.expire)
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
