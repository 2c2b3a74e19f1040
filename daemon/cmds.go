package daemon

import (
	"context"
	"os"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// registerBuiltins installs the commands that need no leases, plus the
// lockspace commands whose wire shape is fixed and whose work is done by
// the lease manager's Lockspaces (startManager registers the others).
func (s *Server) registerBuiltins() {
	s.Handle(wire.CmdRegister, ClassKeep, cmdRegister)
	s.Handle(wire.CmdVersion, ClassKeep, cmdVersion)
	s.Handle(wire.CmdRestrict, ClassKeep, cmdRestrict)
	s.Handle(wire.CmdStatus, ClassClose, cmdStatus)
	s.Handle(wire.CmdLogDump, ClassClose, cmdLogDump)
	s.Handle(wire.CmdShutdown, ClassClose, cmdShutdown)
	s.Handle(wire.CmdShutdownWait, ClassWork, cmdShutdownWait)
	s.Handle(wire.CmdAddLockspace, ClassWork, cmdAddLockspace)
	s.Handle(wire.CmdRemLockspace, ClassWork, cmdRemLockspace)
	s.Handle(wire.CmdInqLockspace, ClassWork, cmdInqLockspace)
	s.Handle(wire.CmdGetLockspaces, ClassClose, cmdGetLockspaces)
	s.Handle(wire.CmdHostStatus, ClassClose, cmdHostStatus)
	s.Handle(wire.CmdReexec, ClassClose, cmdReexec) // handover.go
	s.Handle(wire.CmdHello, ClassKeep, cmdHello)
	s.Handle(wire.CmdLastError, ClassClose, cmdLastError) // lasterror.go
}

// cmdRegister: record the peer pid; no reply (docs/protocol.md "Commands" #1).
func cmdRegister(_ context.Context, c *Conn, _ *wire.Request) error {
	return c.register()
}

// cmdVersion: fixed reply header, connection kept (docs/protocol.md "Commands" #28).
func cmdVersion(_ context.Context, c *Conn, _ *wire.Request) error {
	h := wire.VersionReply(wire.DaemonVersion)
	return c.write(h.Bytes())
}

// cmdHello answers 0: this daemon serves private commands
// (docs/protocol.md "Private commands").
func cmdHello(_ context.Context, c *Conn, q *wire.Request) error {
	return c.Reply(q, 0)
}

// cmdRestrict sets the client's restrict flags and replies 0.
func cmdRestrict(_ context.Context, c *Conn, q *wire.Request) error {
	c.srv.reg.Restrict(c.id, q.Header.CmdFlags)
	return c.Reply(q, 0)
}

// cmdStatus streams DAEMON, CLIENT, LOCKSPACE and RESOURCE records up to the
// requested detail level, then the connection is closed (docs/protocol.md "Commands" #5).
func cmdStatus(_ context.Context, c *Conn, q *wire.Request) error {
	s := c.srv
	level := q.Header.Data
	if level == 0 || level > wire.StateResource {
		level = wire.StateResource
	}
	recs := []wire.StateRecord{s.daemonRecord()}
	if level >= wire.StateClient {
		recs = append(recs, s.clientRecords()...)
	}
	if level >= wire.StateLockspace {
		recs = append(recs, s.mgr.Lockspaces.StatusRecords()...)
	}
	if level >= wire.StateResource {
		recs = append(recs, s.mgr.Resources.StatusRecords()...)
	}
	return c.send(&wire.Reply{Header: replyHeader(q, 0, q.Header.Data2), Records: recs})
}

// daemonRecord is the DAEMON record (docs/protocol.md "Record texts", snapshot key list).
func (s *Server) daemonRecord() wire.StateRecord {
	text := s.cfg.StatusText(s.hostName, os.Getpid(), s.startMon, s.monoSeconds(), Version, wire.DaemonVersion)
	return wire.StateRecord{State: wire.State{Type: wire.StateDaemon, Name: s.hostName}, Text: text}
}

// clientRecords returns the CLIENT records in slot order: the internal
// "helper" and "listener" slots, then every connection (docs/protocol.md "Commands" #5).
func (s *Server) clientRecords() []wire.StateRecord {
	recs := []wire.StateRecord{
		manager.ClientStatus{Pid: -1, Name: "helper"}.Record(0, -1, 0, 0),
		manager.ClientStatus{Pid: -1, Name: "listener"}.Record(1, s.lnFD, 0, 0),
	}
	for _, c := range s.clients() {
		recs = append(recs, c.clientRecord())
	}
	return recs
}

// cmdLogDump: header with data = byte count, length echoed from the
// request, then the log bytes; connection closed (docs/protocol.md "Commands" #6).
func cmdLogDump(_ context.Context, c *Conn, q *wire.Request) error {
	h := replyHeader(q, 0, q.Header.Data2)
	h.Length = q.Header.Length
	return c.send(&wire.Reply{Header: h, Data: c.srv.LogDump()})
}

// cmdShutdown: no reply; the connection is closed (docs/protocol.md "Commands" #4).
func cmdShutdown(_ context.Context, c *Conn, q *wire.Request) error {
	c.srv.RequestShutdown(q.Header.Data != 0)
	return nil
}

// cmdShutdownWait: -EBUSY at once when refused; otherwise the connection is
// held and answered with a zeroed header at exit (docs/protocol.md "Commands" #29).
func cmdShutdownWait(_ context.Context, c *Conn, q *wire.Request) error {
	s := c.srv
	force := q.Header.Data != 0
	if !force && s.lockspaceCount() > 0 {
		s.lg.Warn("ignore shutdown, lockspace exists")
		return c.Reply(q, rescode.RvEBUSY)
	}
	if !s.addWaiter(c) {
		return errCloseConn
	}
	s.RequestShutdown(force)
	return ErrHold
}

func lockspaceOf(q *wire.Request) wire.Lockspace {
	if q.Lockspace == nil {
		return wire.Lockspace{}
	}
	return *q.Lockspace
}

func cmdAddLockspace(ctx context.Context, c *Conn, q *wire.Request) error {
	err := c.srv.mgr.Lockspaces.Add(ctx, manager.AddRequest{Lockspace: lockspaceOf(q),
		Async: q.Header.CmdFlags&wire.AddAsync != 0, IOTimeout: q.Header.Data,
		NoDelay: q.Header.CmdFlags&wire.AddNoDelay != 0})
	return c.Reply(q, c.result(err))
}

func cmdRemLockspace(ctx context.Context, c *Conn, q *wire.Request) error {
	f := q.Header.CmdFlags
	err := c.srv.mgr.Lockspaces.Rem(ctx, manager.RemRequest{Lockspace: lockspaceOf(q),
		Async: f&wire.RemAsync != 0, Unused: f&wire.RemUnused != 0})
	return c.Reply(q, c.result(err))
}

func cmdInqLockspace(ctx context.Context, c *Conn, q *wire.Request) error {
	err := c.srv.mgr.Lockspaces.Inq(ctx, manager.InqRequest{Lockspace: lockspaceOf(q),
		Wait: q.Header.CmdFlags&wire.InqWait != 0})
	return c.Reply(q, c.result(err))
}

// cmdGetLockspaces: header (length 32 + 1104 x count, data2 = count) and the
// lockspaces; connection closed (docs/protocol.md "Commands" #22).
func cmdGetLockspaces(_ context.Context, c *Conn, q *wire.Request) error {
	return c.send(&wire.Reply{Header: replyHeader(q, 0, 0), Lockspaces: c.srv.mgr.Lockspaces.List()})
}

// cmdHostStatus: header (length 32, data = result) then HOST records on
// success; connection closed (docs/protocol.md "Commands" #15).
func cmdHostStatus(_ context.Context, c *Conn, q *wire.Request) error {
	recs, err := c.srv.mgr.Lockspaces.HostStatus(lockspaceOf(q).Name)
	rv := c.result(err)
	if rv < 0 {
		recs = nil
	}
	return c.send(&wire.Reply{Header: replyHeader(q, rv, q.Header.Data2), Records: recs})
}
