package serving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/wire"
)

// Pending requests (docs/upgrade.md "Pending requests"): a restartable
// command still running when the daemon quiesces is cancelled with
// ErrRestart, its reply withheld, and its raw bytes kept on its
// connection; the image that serves next runs it again and answers it.

// Restartable reports whether q may be cancelled by a handover and run
// again: its failure leaves nothing behind. A synchronous ADD_LOCKSPACE
// (the join is cancelled as by a rem_lockspace during the add),
// INQ_LOCKSPACE with WAIT (a read), and ACQUIRE and CONVERT, but these
// two only until their first disk write (WriteGuarded): cancelled
// mid-ballot, acquires let TestReexecMixed see the C host hold one lease
// twice with the same lver (docs/upgrade.md "Pending requests").
func Restartable(q *wire.Request) bool {
	switch q.Header.Cmd {
	case wire.CmdAddLockspace:
		return q.Header.CmdFlags&wire.AddAsync == 0
	case wire.CmdInqLockspace:
		return q.Header.CmdFlags&wire.InqWait != 0
	case wire.CmdAcquire, wire.CmdConvert:
		return true
	}
	return false
}

// WriteGuarded reports whether the restartable q may be cancelled only
// before its first disk write: its handler then names the slot's
// paxos.WriteGuard (Slot.Guard) in its paxos request, and once a write
// has gone out the handover waits for it instead (docs/upgrade.md
// "Pending requests").
func WriteGuarded(q *wire.Request) bool {
	return q.Header.Cmd == wire.CmdAcquire || q.Header.Cmd == wire.CmdConvert
}

// DecodePending decodes a handed-over request and checks it is one this
// image may run again.
func DecodePending(raw []byte) (*wire.Request, error) {
	q, err := wire.ReadRequest(bytes.NewReader(raw), len(raw))
	if err != nil {
		return nil, fmt.Errorf("handed-over request: %w", err)
	}
	if q.Consumed+wire.HeaderSize != len(raw) {
		return nil, fmt.Errorf("handed-over request: %d bytes, the request has %d", len(raw), q.Consumed+wire.HeaderSize)
	}
	if !Restartable(q) {
		return nil, fmt.Errorf("handed-over request cmd %d is not restartable", q.Header.Cmd)
	}
	return q, nil
}

// ReplyResult is the result field of a reply header (0 if b is short).
func ReplyResult(b []byte) int32 {
	var h wire.Header
	if h.Decode(b) != nil {
		return 0
	}
	return int32(h.Data)
}

// Slot is a connection's restartable request while its handler runs.
// The zero value is empty.
type Slot struct {
	mu sync.Mutex
	p  *pending
}

type pending struct {
	raw       []byte
	cancel    context.CancelCauseFunc
	wrote     bool     // a reply went out: the request is not handed over
	intercept bool     // the handover cancelled it: writes are held
	held      [][]byte // the writes held
	guarded   bool     // cancellable only before its first disk write
	written   bool     // a guarded request has written: not cancelled any more
}

// Start puts the request raw in the slot and returns the context its
// handler runs with (a child of parent that Cancel ends).
func (s *Slot) Start(parent context.Context, raw []byte) context.Context {
	return s.start(parent, raw, false)
}

// StartGuarded is Start for a request that may be cancelled only before
// its first disk write (WriteGuarded): its handler passes Guard to the
// paxos request, and Cancel does nothing once a write has gone out.
func (s *Slot) StartGuarded(parent context.Context, raw []byte) context.Context {
	return s.start(parent, raw, true)
}

func (s *Slot) start(parent context.Context, raw []byte, guarded bool) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	p := &pending{raw: raw, cancel: cancel, guarded: guarded}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return ctx
}

// Guard returns the write guard of the guarded request in the slot, or
// nil when the slot is empty or its request is not guarded.
func (s *Slot) Guard() paxos.WriteGuard {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || !s.p.guarded {
		return nil
	}
	return writeGuard{s, s.p}
}

// writeGuard is a guarded request's paxos.WriteGuard: a write goes out
// only if the handover has not cancelled the request, and then the
// request can no longer be cancelled (the check and the mark are one step
// under the slot's lock, as is Cancel's check).
type writeGuard struct {
	s *Slot
	p *pending
}

var _ paxos.WriteGuard = writeGuard{}

func (g writeGuard) BeforeWrite() bool {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if g.p.intercept {
		return false
	}
	g.p.written = true
	return true
}

// Hold is called with every write of the connection: it keeps a copy of
// b and reports true if the request was cancelled (b must then not be
// sent); otherwise it notes that a reply went out.
func (s *Slot) Hold(b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.p
	if p == nil {
		return false
	}
	if p.intercept {
		p.held = append(p.held, bytes.Clone(b))
		return true
	}
	p.wrote = true
	return false
}

// Cancel cancels the request in the slot with cause, unless its reply
// has gone out or, for a guarded request, it has written to disk.
func (s *Slot) Cancel(cause error) {
	s.mu.Lock()
	p := s.p
	if p == nil || p.wrote || p.intercept || p.written {
		s.mu.Unlock()
		return
	}
	p.intercept = true
	s.mu.Unlock()
	p.cancel(cause)
}

// End empties the slot after the handler returned err. redo says the
// request was cancelled and answered with a failure: drop the reply and
// keep raw for the next image. Otherwise held are the writes to send now
// (a success that completed before the cancel took effect, or an error).
func (s *Slot) End(err error) (redo bool, raw []byte, held [][]byte) {
	s.mu.Lock()
	p := s.p
	s.p = nil
	s.mu.Unlock()
	if p == nil {
		return false, nil, nil
	}
	p.cancel(nil)
	if !p.intercept {
		return false, nil, nil
	}
	if err == nil && len(p.held) == 1 && ReplyResult(p.held[0]) < 0 {
		return true, p.raw, nil
	}
	return false, nil, p.held
}

// ErrRedo ends a read at a message boundary: the connection has a
// handed-over request to run first.
var ErrRedo = errors.New("daemon: handed-over request to run")
