package serving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/handover"
)

// Gate is the quiesce gate of a serving daemon (docs/upgrade.md "What is
// wired into the daemon"): Quiesce stops the accept loop and every
// connection Reader at a message boundary, Wait waits for the requests in
// flight, Resume undoes it. The zero value is an open gate.
type Gate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	quiesced bool
	serving  int // connection readers that have started
	parked   int // readers waiting at a message boundary
	busy     int // requests between their first byte and the end of their dispatch
	accept   bool
}

func (g *Gate) c() *sync.Cond {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	return g.cond
}

// Quiesce closes the gate: readers park at their next message boundary,
// the accept loop at its next deadline (ParkAccept).
func (g *Gate) Quiesce() {
	g.mu.Lock()
	g.quiesced = true
	g.mu.Unlock()
}

// Resume opens the gate again.
func (g *Gate) Resume() {
	g.mu.Lock()
	g.quiesced = false
	g.c().Broadcast()
	g.mu.Unlock()
}

// Wait waits, up to timeout, until the accept loop is parked, no request
// is in flight and every started reader is parked.
func (g *Gate) Wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		g.mu.Lock()
		g.c().Broadcast()
		g.mu.Unlock()
	})
	defer timer.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for !(g.accept && g.busy == 0 && g.parked == g.serving) {
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon did not quiesce within %v: %d command(s) in progress, %d of %d reader(s) stopped",
				timeout, g.busy, g.parked, g.serving)
		}
		g.c().Wait()
	}
	return nil
}

// ParkAccept parks the accept loop while the gate is closed; it reports
// whether it waited.
func (g *Gate) ParkAccept() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.quiesced {
		return false
	}
	g.accept = true
	g.c().Broadcast()
	for g.quiesced {
		g.c().Wait()
	}
	g.accept = false
	return true
}

// Reader reads a connection's requests through a Gate. Between requests
// (Begin) it parks while the gate is closed; once a request's first byte
// is read it counts as busy until the next Begin. It keeps the bytes of
// the request being read (Raw) and a handed-over request to run first
// (pending.go). Its state is guarded by the gate.
type Reader struct {
	g    *Gate
	conn interface {
		Read([]byte) (int, error)
		SetReadDeadline(time.Time) error
	}
	raw      []byte
	redo     []byte
	started  bool
	inReq    bool
	ended    bool // the serve loop has stopped reading (closed or held)
	timedOut bool // the last read hit a deadline outside a request
	detached bool // the reexec command's own connection
}

// Init binds r to its gate and connection; the serve loop calls it
// before anything else.
func (r *Reader) Init(g *Gate, conn interface {
	Read([]byte) (int, error)
	SetReadDeadline(time.Time) error
}) {
	g.mu.Lock()
	r.g, r.conn = g, conn
	g.mu.Unlock()
}

// Raw is the bytes of the request read since the last Begin.
func (r *Reader) Raw() []byte { return r.raw }

// Reading reports whether r's serve loop reads requests (not before it
// starts, not after it ended or handed the connection to a handler) and
// whether a handler holds the connection.
func (g *Gate) Reading(r *Reader) (reading, held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.started && !r.ended, r.ended && !r.detached
}

// Detached reports whether r was detached (Detach).
func (g *Gate) Detached(r *Reader) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.detached
}

// Redo returns a copy of r's handed-over request (nil: none).
func (g *Gate) Redo(r *Reader) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return bytes.Clone(r.redo)
}

// SetRedo gives r a handed-over request to run first.
func (g *Gate) SetRedo(r *Reader, raw []byte) {
	g.mu.Lock()
	r.redo = raw
	g.mu.Unlock()
}

// StartPending starts a restartable request read by r in slot, with a
// context of parent that a handover cancels; if the gate is already
// closed the request does not run (ok false) and is kept to run again.
// guarded: the request may be cancelled only before its first disk write
// (Slot.StartGuarded).
func (g *Gate) StartPending(r *Reader, slot *Slot, parent context.Context, raw []byte, guarded bool) (ctx context.Context, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.quiesced {
		r.redo = raw
		return nil, false
	}
	if guarded {
		return slot.StartGuarded(parent, raw), true
	}
	return slot.Start(parent, raw), true
}

// Begin marks a message boundary: the previous request is done.
func (r *Reader) Begin() {
	g := r.g
	g.mu.Lock()
	if !r.started {
		r.started = true
		g.serving++
	}
	if r.inReq {
		r.inReq = false
		g.busy--
		g.c().Broadcast()
	}
	g.mu.Unlock()
	r.raw = r.raw[:0]
}

// End is called when the reader stops for good.
func (r *Reader) End() {
	g := r.g
	g.mu.Lock()
	detached := r.detached
	g.mu.Unlock()
	if detached {
		return
	}
	r.Begin()
	g.mu.Lock()
	r.ended = true
	g.serving--
	g.c().Broadcast()
	g.mu.Unlock()
}

// Detach takes r out of the gate's accounting for good: its connection
// is answered by this image and then closed.
func (r *Reader) Detach() {
	r.End()
	r.g.mu.Lock()
	r.detached = true
	r.g.mu.Unlock()
}

// TakeRedo returns r's handed-over request and counts it as a request in
// flight, so a later quiesce waits for it or cancels it again.
func (r *Reader) TakeRedo() []byte {
	g := r.g
	g.mu.Lock()
	raw := r.redo
	r.redo = nil
	if !r.inReq {
		r.inReq = true
		g.busy++
	}
	g.mu.Unlock()
	r.raw = append(r.raw[:0], raw...)
	return raw
}

// park waits while the gate is closed; it reports whether it waited and
// then whether r has a handed-over request to run.
func (r *Reader) park() (waited, redo bool) {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.quiesced && r.timedOut {
		// A deadline of a quiesce that ended (a failed handover) while
		// this reader was in a command: lift it, under the gate lock so
		// that it cannot lift the deadline of a quiesce starting now.
		_ = r.conn.SetReadDeadline(time.Time{})
	}
	r.timedOut = false
	if g.quiesced {
		waited = true
		g.parked++
		g.c().Broadcast()
		for g.quiesced {
			g.c().Wait()
		}
		g.parked--
	}
	return waited, r.redo != nil
}

// Read reads from the connection through the gate. At a message boundary
// it parks while the gate is closed, and returns ErrRedo if a handed-over
// request waits. A deadline set by Quiesce inside a request is lifted: the
// request is read whole and processed first.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if !r.inReq {
			waited, redo := r.park()
			if waited {
				_ = r.conn.SetReadDeadline(time.Time{})
			}
			if redo {
				return 0, ErrRedo
			}
		}
		n, err := r.conn.Read(p)
		if n > 0 && !r.inReq {
			r.g.mu.Lock()
			r.inReq = true
			r.g.busy++
			r.g.mu.Unlock()
		}
		if n > 0 && len(r.raw)+n <= handover.MaxPendingLen {
			r.raw = append(r.raw, p[:n]...)
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				return n, nil
			}
			if r.inReq {
				_ = r.conn.SetReadDeadline(time.Time{})
			} else {
				r.timedOut = true
			}
			continue
		}
		return n, err
	}
}
