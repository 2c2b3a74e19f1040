package daemon

import (
	"bytes"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/handover/serving"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/wire"
)

// Pending requests in a handover (docs/upgrade.md "Pending requests";
// the rules are in package handover/serving): a restartable command
// still running when the daemon quiesces is cancelled, its reply
// withheld, and its raw bytes kept on its connection (c.redo); the image
// that serves next (the new one, or this one if the handover fails) runs
// it again and answers it.

// runHandler runs a restartable request's handler: not at all if the
// daemon is already quiesced (the request is then kept for the next
// image), else with a context the quiesce cancels.
func (c *Conn) runHandler(h Handler, q *wire.Request) error {
	s := c.srv
	raw := bytes.Clone(c.rd.Raw())
	if len(raw) != wire.HeaderSize+q.Consumed {
		// Not read through the gate whole (Serve on another listener):
		// run it as any other command.
		return h(s.ctx, c, q)
	}
	ctx, ok := s.gate.StartPending(&c.rd, &c.pend, s.ctx, raw, serving.WriteGuarded(q))
	if !ok {
		return nil
	}
	err := h(ctx, c, q)
	redo, raw, held := c.pend.End(err)
	if redo {
		s.gate.SetRedo(&c.rd, raw)
		s.lg.Warn("cmd_"+q.Header.Cmd.DebugName()+" cancelled for reexec, runs again in the next image",
			zap.Int("ci", c.slot), zap.Int("fd", c.fd))
		return nil
	}
	for _, b := range held {
		if werr := c.write(b); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// writeGuard is the paxos.WriteGuard of c's request when it may be
// cancelled only before its first disk write (serving.WriteGuarded), else
// nil: the acquire and convert handlers name it in their requests.
func (c *Conn) writeGuard() paxos.WriteGuard { return c.pend.Guard() }

// cancelPending cancels c's restartable request, unless its reply has
// gone out (Quiesce).
func (c *Conn) cancelPending() { c.pend.Cancel(manager.ErrRestart) }

// runRedo runs c's handed-over request (the serve loop, after ErrRedo).
// It counts as a request in flight, so a later quiesce waits for it or
// cancels it again.
func (c *Conn) runRedo() error {
	raw := c.rd.TakeRedo()
	q, err := serving.DecodePending(raw)
	if err != nil {
		return err
	}
	c.srv.lg.Warn("cmd_"+q.Header.Cmd.DebugName()+" handed-over request runs", zap.Int("ci", c.slot), zap.Int("fd", c.fd))
	return c.dispatch(q)
}
