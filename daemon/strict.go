package daemon

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/internal/strictpeer"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Strict peer mode (ours, off by default; docs/security.md): the decisions
// are internal/strictpeer; here the handler wrapper, the log line and the
// -EPERM reply.

// peerIdentityOf reads the identity the kernel recorded at connect.
func peerIdentityOf(c *Conn) strictpeer.Identity {
	rc, err := c.rawConn()
	if err != nil {
		rc = nil
	}
	return strictpeer.Read(rc, c.PeerPid())
}

// strictHandler wraps h with the strict-mode check of cmd when strict mode
// is on; otherwise h is returned as it is, so the default mode runs
// exactly the 3.8.5 code paths.
func (s *Server) strictHandler(h Handler) Handler {
	if !s.cfg.StrictPeer {
		return h
	}
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		if strictpeer.PolicyOf(q) != strictpeer.Open {
			id := peerIdentityOf(c)
			if target, ok := c.srv.strictAllowed(id, q); !ok {
				return c.strictRefuse(q, id, target)
			}
		}
		return h(ctx, c, q)
	}
}

// strictAllowed decides q from peer id for strict mode (strictpeer.Check).
// When it refuses, target is the pid the command named or whose lease it
// touches (-1 when none).
func (s *Server) strictAllowed(id strictpeer.Identity, q *wire.Request) (target int, ok bool) {
	var r *strictpeer.Refusal
	if err := strictpeer.Check(id, s.cfg.GID, s.holders, q); errors.As(err, &r) {
		return r.Target, false
	}
	return -1, true
}

// strictRefuse logs and answers a refused command with -EPERM in the reply
// shape of its command.
func (c *Conn) strictRefuse(q *wire.Request, id strictpeer.Identity, target int) error {
	c.srv.lg.Warn("cmd_"+q.Header.Cmd.DebugName()+" refused by strict_peer", zap.Int("ci", c.slot), zap.Int("fd", c.fd),
		zap.Int("peer_pid", int(id.Pid)), zap.Int("uid", id.UID), zap.Int("gid", id.GID), zap.Int("target_pid", target))
	if target > 0 {
		c.noteCause(fmt.Sprintf("refused by strict peer mode: only root or the daemon's group may act for pid %d", target))
	} else {
		c.noteCause("refused by strict peer mode: only root or the daemon's group may send this command")
	}
	eperm := int32(rescode.RvEPERM)
	switch q.Header.Cmd {
	case wire.CmdShutdown:
		return nil // no reply; the connection is closed
	case wire.CmdGetLVB:
		return c.send(lvbError(q, eperm))
	case wire.CmdInquire:
		return c.send(&wire.Reply{Header: replyHeader(q, eperm, 0)})
	}
	return c.Reply(q, rescode.RvEPERM)
}
