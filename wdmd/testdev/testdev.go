// Package testdev is an emulated watchdog device for tests of wdmd and of
// the recovery chain. It follows the Linux watchdog rules wdmd relies on
// (docs/wdmd.md "Device rules"): only one opener at a time; opening arms the timer
// and pings; SetTimeout, Keepalive and writes ping; a write containing
// 'V' just before close lets the close stop the timer (unless Nowayout);
// any other close, including the death of the process holding the device,
// pings once and leaves the timer running. When an armed device is not
// pinged for its timeout it "fires": the Bank records the event and calls
// OnFire, where a test can emulate the host reset.
//
// A Bank is used in-process through Driver (for Monitor tests under
// testing/synctest), or served on a unix socket with Serve so that a wdmd
// process (cmd/wdmd --test-device SOCKET) uses it through Dial. The timer
// then runs in the test process, so killing wdmd does not stop it, and
// the end of wdmd's connection is an unclean close, like process death.
package testdev

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/wdmd"
)

// Kind names a device event.
type Kind string

const (
	Open         Kind = "open"          // Value: timeout in force
	GetTimeout   Kind = "get"           // Value: reported timeout
	SetTimeout   Kind = "set"           // Value: new timeout
	Keepalive    Kind = "ping"          // explicit WDIOC_KEEPALIVE
	Write        Kind = "write"         // Value: 1 if it contained 'V'
	CloseClean   Kind = "close-clean"   // timer stopped
	CloseUnclean Kind = "close-unclean" // last ping, timer still running
	Fire         Kind = "fire"          // the host would have been reset
	Refused      Kind = "refused"       // an operation that failed; Value: errno
)

// Event is one thing that happened to a device. At is on the Bank's clock
// (CLOCK_MONOTONIC by default, so its whole seconds match wdmd's log).
type Event struct {
	At    time.Duration
	Path  string
	Kind  Kind
	Value int
}

func (e Event) String() string {
	return fmt.Sprintf("%.3f %s %s %d", e.At.Seconds(), e.Path, e.Kind, e.Value)
}

// Pings says whether the event counts as a ping of the timer.
func (e Event) Pings() bool {
	switch e.Kind {
	case Open, SetTimeout, Keepalive, Write, CloseUnclean:
		return true
	}
	return false
}

// Options configure a Bank.
type Options struct {
	// Paths are the device paths that exist; nil means every path does.
	Paths []string
	// InitialTimeout is the timeout a device reports before any
	// SetTimeout (0: 60).
	InitialTimeout int
	// FireAfter, if set, replaces the timeout as the time without a ping
	// after which an armed device fires. GetTimeout still reports the
	// timeout that was set, so a wdmd checking for 60 is satisfied while
	// a test sees the reset after a few seconds.
	FireAfter time.Duration
	// RejectSetTimeout makes SetTimeout fail with EINVAL.
	RejectSetTimeout bool
	// Nowayout makes every close leave the timer running.
	Nowayout bool
	// Clock gives event times; nil means clock.NewSystem().
	Clock wdmd.Clock
	// OnFire is called (without locks held) when a device fires.
	OnFire func(Event)
	// Log, if set, gets one line per event.
	Log io.Writer
}

// Bank is a set of emulated devices sharing one clock and event record.
type Bank struct {
	opts  Options
	clock wdmd.Clock

	mu      sync.Mutex
	devs    map[string]*dev
	events  []Event
	fired   chan struct{}
	fireEv  Event
	hasFire bool
}

type dev struct {
	path        string
	open        bool
	armed       bool
	timeout     int
	lastPing    time.Duration
	expectClose bool
	timer       *time.Timer
}

// NewBank returns an empty bank.
func NewBank(o Options) *Bank {
	if o.InitialTimeout == 0 {
		o.InitialTimeout = 60
	}
	b := &Bank{opts: o, clock: o.Clock, devs: map[string]*dev{}, fired: make(chan struct{})}
	if b.clock == nil {
		b.clock = clock.NewSystem()
	}
	return b
}

// Events returns a copy of every event so far.
func (b *Bank) Events() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Event(nil), b.events...)
}

// Fired is closed when a device fires for the first time.
func (b *Bank) Fired() <-chan struct{} { return b.fired }

// FireEvent returns the first fire, if any.
func (b *Bank) FireEvent() (Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fireEv, b.hasFire
}

// WaitFired waits for the first fire or for ctx.
func (b *Bank) WaitFired(ctx context.Context) (Event, error) {
	select {
	case <-b.fired:
		ev, _ := b.FireEvent()
		return ev, nil
	case <-ctx.Done():
		return Event{}, ctx.Err()
	}
}

// Armed reports whether the device at path has a running timer.
func (b *Bank) Armed(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.devs[path]
	return d != nil && d.armed
}

// Stop stops every timer (the end of a test).
func (b *Bank) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.devs {
		if d.timer != nil {
			d.timer.Stop()
		}
		d.armed = false
	}
}

// record appends an event; b.mu is held.
func (b *Bank) record(path string, k Kind, v int) Event {
	ev := Event{At: b.clock.Now(), Path: path, Kind: k, Value: v}
	b.events = append(b.events, ev)
	if b.opts.Log != nil {
		fmt.Fprintln(b.opts.Log, ev.String())
	}
	return ev
}

func (b *Bank) exists(path string) bool {
	if b.opts.Paths == nil {
		return true
	}
	for _, p := range b.opts.Paths {
		if p == path {
			return true
		}
	}
	return false
}

func (b *Bank) stat(path string) error {
	if !b.exists(path) {
		return unix.ENOENT
	}
	return nil
}

func (b *Bank) dev(path string) *dev {
	d := b.devs[path]
	if d == nil {
		d = &dev{path: path, timeout: b.opts.InitialTimeout}
		b.devs[path] = d
	}
	return d
}

func (b *Bank) fireDelay(d *dev) time.Duration {
	if b.opts.FireAfter > 0 {
		return b.opts.FireAfter
	}
	return time.Duration(d.timeout) * time.Second
}

// ping restarts the timer; b.mu is held.
func (b *Bank) ping(d *dev) {
	d.armed = true
	d.lastPing = b.clock.Now()
	delay := b.fireDelay(d)
	if d.timer == nil {
		d.timer = time.AfterFunc(delay, func() { b.check(d) })
	} else {
		d.timer.Reset(delay)
	}
}

// check fires d if it is armed and was not pinged for its fire delay.
func (b *Bank) check(d *dev) {
	b.mu.Lock()
	if !d.armed || b.hasFire {
		b.mu.Unlock()
		return
	}
	now := b.clock.Now()
	if left := d.lastPing + b.fireDelay(d) - now; left > 0 {
		d.timer.Reset(left)
		b.mu.Unlock()
		return
	}
	ev := b.record(d.path, Fire, int((now-d.lastPing)/time.Millisecond))
	b.fireEv, b.hasFire = ev, true
	close(b.fired)
	onFire := b.opts.OnFire
	b.mu.Unlock()
	if onFire != nil {
		onFire(ev)
	}
}

func (b *Bank) open(path string) (*handle, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.exists(path) {
		b.record(path, Refused, int(unix.ENOENT))
		return nil, unix.ENOENT
	}
	d := b.dev(path)
	if d.open {
		b.record(path, Refused, int(unix.EBUSY))
		return nil, unix.EBUSY
	}
	d.open = true
	d.expectClose = false
	b.ping(d)
	b.record(path, Open, d.timeout)
	return &handle{b: b, d: d}, nil
}

// handle is one open file of a device. It implements wdmd.Watchdog.
type handle struct {
	b      *Bank
	d      *dev
	closed bool
}

var _ wdmd.Watchdog = (*handle)(nil)

func (h *handle) GetTimeout() (int, error) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.closed {
		return 0, unix.EBADF
	}
	h.b.record(h.d.path, GetTimeout, h.d.timeout)
	return h.d.timeout, nil
}

func (h *handle) SetTimeout(t int) (int, error) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.closed {
		return 0, unix.EBADF
	}
	if h.b.opts.RejectSetTimeout || t <= 0 {
		h.b.record(h.d.path, Refused, int(unix.EINVAL))
		return 0, unix.EINVAL
	}
	h.d.timeout = t
	h.b.ping(h.d)
	h.b.record(h.d.path, SetTimeout, t)
	return t, nil
}

func (h *handle) Keepalive() error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.closed {
		return unix.EBADF
	}
	h.b.ping(h.d)
	h.b.record(h.d.path, Keepalive, 0)
	return nil
}

func (h *handle) Write(p []byte) (int, error) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.closed {
		return 0, unix.EBADF
	}
	h.d.expectClose = false
	for _, c := range p {
		if c == 'V' {
			h.d.expectClose = true
		}
	}
	h.b.ping(h.d)
	h.b.record(h.d.path, Write, b2i(h.d.expectClose))
	return len(p), nil
}

func (h *handle) Close() error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.closed {
		return unix.EBADF
	}
	h.closed = true
	d := h.d
	d.open = false
	if d.expectClose && !h.b.opts.Nowayout {
		d.armed = false
		if d.timer != nil {
			d.timer.Stop()
		}
		h.b.record(d.path, CloseClean, 0)
		return nil
	}
	h.b.ping(d)
	h.b.record(d.path, CloseUnclean, 0)
	return nil
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Driver returns an in-process wdmd.Driver over the bank.
func (b *Bank) Driver() wdmd.Driver { return localDriver{b} }

type localDriver struct{ b *Bank }

func (l localDriver) Stat(path string) error { return l.b.stat(path) }
func (l localDriver) Open(path string) (wdmd.Watchdog, error) {
	h, err := l.b.open(path)
	if err != nil {
		return nil, err
	}
	return h, nil
}
