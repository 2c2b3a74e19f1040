package daemon

import (
	"context"
	"encoding/binary"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// Host events (docs/protocol.md "Events"): a REG_EVENT connection is handed
// to the lockspace as a manager.Listener; the manager sends it event_cb
// messages without blocking and closes it when it cannot take one.

// cmdRegEvent: REG_EVENT. On success the connection is handed to the
// lockspace (ErrHold) and only event_cb messages are written to it.
func cmdRegEvent(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		name := lockspaceOf(q).Name
		c.mu.Lock()
		c.evListener = true
		c.mu.Unlock()
		rv := c.result(m.RegEvent(name, c))
		if rv != 0 {
			c.mu.Lock()
			c.evListener = false
			c.mu.Unlock()
		}
		if err := c.send(&wire.Reply{Header: replyHeader(q, rv, q.Header.Data2)}); err != nil || rv != 0 {
			if rv == 0 {
				m.DropListener(name, c)
			}
			return err
		}
		// A listener belongs to the lockspace, not to the client table:
		// 3.8.5 hands the descriptor over and frees the client slot, so
		// status does not list it.
		c.srv.freeSlot(c)
		c.srv.lg.Info("cmd_reg_event", zap.Int("fd", c.fd), zap.Int32("rv", rv))
		return ErrHold
	}
}

// cmdEndEvent: END_EVENT, sent on a new connection after the client wrote
// the end marker on its listener.
func cmdEndEvent(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		return c.send(&wire.Reply{Header: replyHeader(q, c.result(m.EndEvent(lockspaceOf(q).Name)), q.Header.Data2)})
	}
}

// listenerEnded reads at most 4 bytes from c without blocking.
func listenerEnded(c *Conn) bool {
	rc, err := c.rawConn()
	if err != nil {
		return true
	}
	var buf [4]byte
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	switch {
	case rerr == unix.EAGAIN:
		return false
	case rerr != nil, n == 0:
		return true
	case n == 4 && binary.LittleEndian.Uint32(buf[:]) == 1:
		return true
	}
	return false
}

// sendNoWait writes b in one non-blocking send; an error if it did not
// all go (EAGAIN when the listener's buffer is full, EPIPE when it has
// gone).
func sendNoWait(c *Conn, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	rc, err := c.rawConn()
	if err != nil {
		return err
	}
	var n int
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), b, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		return true
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if n != len(b) {
		return unix.EAGAIN
	}
	return nil
}
