package daemon

import (
	"context"
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
)

// Host events (docs/protocol.md "Events", docs/delta.md "Receiving events"): a REG_EVENT connection
// is kept by the lockspace as a listener; every event addressed to us that
// the lockspace finds in another host's lease is sent to each listener as
// an 80-byte event_cb. Sends never block: a listener that cannot take the
// message is closed and dropped, as sanlock does.

// cmdRegEvent: REG_EVENT. On success the connection is handed to the
// lockspace (ErrHold) and only event_cb messages are written to it.
func cmdRegEvent(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		name := lockspaceOf(q).Name
		rv := m.regEvent(name, c)
		if err := c.write(headerReply(q, rv)); err != nil || rv != 0 {
			if rv == 0 {
				m.dropListener(name, c)
			}
			return err
		}
		// A listener belongs to the lockspace, not to the client table:
		// 3.8.5 hands the descriptor over and frees the client slot, so
		// status does not list it.
		c.srv.freeSlot(c)
		m.lg().Info(fmt.Sprintf("cmd_reg_event fd %d rv %d", c.fd, rv))
		return ErrHold
	}
}

// cmdEndEvent: END_EVENT, sent on a new connection after the client wrote
// the end marker on its listener.
func cmdEndEvent(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		return c.write(headerReply(q, m.endEvent(lockspaceOf(q).Name)))
	}
}

// headerReply is a copy of the request header with version 1, length 32
// and data = rv (data2 echoed).
func headerReply(q *client.Request, rv int32) []byte {
	h := q.Header
	h.Version, h.Length, h.Data = client.ProtoVersion, client.HeaderSize, uint32(rv)
	return h.Bytes()
}

// regEvent adds c as a listener of lockspace name.
func (m *Lockspaces) regEvent(name string, c *Conn) int32 {
	if name == "" {
		return client.RvEINVAL
	}
	m.mu.Lock()
	sp := m.byName(listSpaces, name)
	if sp == nil {
		m.mu.Unlock()
		return client.RvENOENT
	}
	full := len(sp.listeners) >= maxEventListeners
	m.mu.Unlock()
	if full {
		m.pruneListeners(sp)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp.list != listSpaces {
		return client.RvENOENT
	}
	if len(sp.listeners) >= maxEventListeners {
		return client.RvENOCSI
	}
	sp.listeners = append(sp.listeners, c)
	return 0
}

// dropListener removes c from name's listeners (the REG_EVENT reply could
// not be sent).
func (m *Lockspaces) dropListener(name string, c *Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp := m.anyByName(name); sp != nil {
		sp.removeListener(c)
	}
}

// removeListener deletes c from the list. Called with m.mu.
func (sp *space) removeListener(c *Conn) bool {
	for i, x := range sp.listeners {
		if x == c {
			sp.listeners = append(sp.listeners[:i:i], sp.listeners[i+1:]...)
			return true
		}
	}
	return false
}

// endEvent answers END_EVENT: drop the listeners that ended.
func (m *Lockspaces) endEvent(name string) int32 {
	if name == "" {
		return client.RvEINVAL
	}
	m.mu.Lock()
	sp := m.byName(listSpaces, name)
	m.mu.Unlock()
	if sp == nil {
		return client.RvENOENT
	}
	m.pruneListeners(sp)
	return 0
}

// pruneListeners does a non-blocking 4-byte read on every listener and
// closes those that ended: the value 1 (the end marker), EOF or an error.
// Would-block and other values keep the listener.
func (m *Lockspaces) pruneListeners(sp *space) {
	m.mu.Lock()
	ls := append([]*Conn(nil), sp.listeners...)
	m.mu.Unlock()
	for _, c := range ls {
		if !listenerEnded(c) {
			continue
		}
		m.mu.Lock()
		removed := sp.removeListener(c)
		m.mu.Unlock()
		if removed {
			_ = c.Close()
		}
	}
}

// listenerEnded reads at most 4 bytes from c without blocking.
func listenerEnded(c *Conn) bool {
	rc, err := c.uc.SyscallConn()
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

// deliver sends one received event to every listener of the lockspace.
func (sp *space) deliver(ev delta.ReceivedEvent) {
	m := sp.m
	cb := client.NewEventCB(client.HostEvent{HostID: ev.Event.HostID, Generation: ev.Event.Generation,
		Event: ev.Event.Event, Data: ev.Event.Data}, ev.FromHostID, ev.FromGeneration)
	b, err := cb.MarshalBinary()
	if err != nil {
		return
	}
	m.mu.Lock()
	ls := append([]*Conn(nil), sp.listeners...)
	m.mu.Unlock()
	for _, c := range ls {
		err := sendNoWait(c, b)
		if err == nil {
			continue
		}
		m.mu.Lock()
		removed := sp.removeListener(c)
		m.mu.Unlock()
		if removed {
			// Logged as 3.8.5 does: the send result, its errno, and the
			// descriptor closed with the listener.
			en := errnoOf(err)
			if en < 0 {
				en = int(unix.EIO)
			}
			sp.logf("send_event_callbacks error -1 %d close fd %d", en, c.fd)
			_ = c.Close()
		}
	}
}

// sendNoWait writes b in one non-blocking send; an error if it did not
// all go (EAGAIN when the listener's buffer is full, EPIPE when it has
// gone).
func sendNoWait(c *Conn, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	rc, err := c.uc.SyscallConn()
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
