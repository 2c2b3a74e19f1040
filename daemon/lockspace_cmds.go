package daemon

import (
	"context"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// registerLockspaceCmds installs the lockspace commands beyond the
// built-in add, rem, inq, get_lockspaces and host_status
// (docs/protocol.md "Commands").
func (s *Server) registerLockspaceCmds(m *manager.Lockspaces) {
	s.Handle(wire.CmdGetHosts, ClassClose, cmdGetHosts(m))
	s.Handle(wire.CmdRenewal, ClassClose, cmdRenewal(m))
	s.Handle(wire.CmdSetConfig, ClassClose, cmdSetConfig(m))
	s.Handle(wire.CmdRegEvent, ClassClose, cmdRegEvent(m))
	s.Handle(wire.CmdEndEvent, ClassClose, cmdEndEvent(m))
	s.Handle(wire.CmdSetEvent, ClassWork, cmdSetEvent(m))
	s.Handle(wire.CmdWriteLockspace, ClassWork, cmdWriteLockspace(m))
	s.Handle(wire.CmdReadLockspace, ClassWork, cmdReadLockspace(m))
	s.Handle(wire.CmdExamineLockspace, ClassWork, cmdExamineLockspace(m))
	s.Handle(wire.CmdReadLockspaceHost, ClassWork, cmdReadLockspaceHost(m))
	s.Handle(wire.CmdInitLockspaceHost, ClassWork, cmdInitLockspaceHost(m))
	s.Handle(wire.CmdSetHost, ClassWork, cmdSetHost(m))
}

// cmdSetHost: SET_HOST, data = subcommand (1 DEAD_EXT), the lockspace and
// the target host (docs/protocol.md "Commands of 3.9.5 and 5.1.1" #44).
func cmdSetHost(m *manager.Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		var h wire.Host
		if q.Host != nil {
			h = *q.Host
		}
		return c.Reply(q, c.result(m.SetHost(ctx, lockspaceOf(q), q.Header.Data, h)))
	}
}

// cmdGetHosts: header (length 32 + 32 x count, data = result, data2 =
// count) and the hosts; connection closed (docs/protocol.md "Commands" #23).
func cmdGetHosts(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		ls := lockspaceOf(q)
		var hosts []wire.Host
		var err error
		if q.Header.CmdFlags&wire.GetHostsLocal != 0 {
			hosts, err = m.LocalHost(ls.Name)
		} else {
			hosts, err = m.GetHosts(ls.Name, ls.HostID)
		}
		return c.send(&wire.Reply{Header: replyHeader(q, c.result(err), 0), Hosts: hosts})
	}
}

// cmdRenewal: header (length 32, data2 = io_timeout when history is sent)
// and one RENEWAL record per history entry, oldest first (docs/protocol.md "Commands" #34).
func cmdRenewal(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		rp := wire.Reply{Header: replyHeader(q, 0, q.Header.Data2)}
		if c.srv.cfg.RenewalHistorySize <= 0 {
			return c.send(&rp)
		}
		hist, io, err := m.Renewals(lockspaceOf(q).Name)
		rv := c.result(err)
		rp.Header.Data = uint32(rv)
		if rv < 0 || len(hist) == 0 {
			return c.send(&rp)
		}
		rp.Header.Data2 = uint32(io)
		for _, e := range hist {
			rp.Records = append(rp.Records, wire.StateRecord{State: wire.State{Type: wire.StateRenewal, Data64: e.Timestamp}, Text: e.String()})
		}
		return c.send(&rp)
	}
}

// cmdSetConfig: SET_CONFIG, config command in header data (docs/protocol.md "Commands" #33).
func cmdSetConfig(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		name := lockspaceOf(q).Name
		var err error
		if q.Header.Data == wire.ConfigIOTimeout {
			err = m.SetIOTimeout(name, q.Header.Data2) // 5.x: data2 is the io_timeout
		} else {
			err = m.SetConfig(name, q.Header.Data)
		}
		return c.send(&wire.Reply{Header: replyHeader(q, c.result(err), q.Header.Data2)})
	}
}

// cmdSetEvent: SET_EVENT (docs/protocol.md "Commands" #32).
func cmdSetEvent(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		var he wire.HostEvent
		if q.HostEvent != nil {
			he = *q.HostEvent
		}
		return c.Reply(q, c.result(m.SetEvent(lockspaceOf(q).Name, he, q.Header.CmdFlags)))
	}
}

// cmdExamineLockspace: ask the resource layer to examine the resources
// held in the lockspace; the result is 0 whatever it finds, even for an
// empty name (docs/protocol.md "Commands" #13; checked with sanlock 3.8.5).
func cmdExamineLockspace(m *manager.Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *wire.Request) error {
		m.Examine(lockspaceOf(q).Name)
		return c.Reply(q, 0)
	}
}

// cmdWriteLockspace: initialise the delta leases (docs/protocol.md "Commands" #18). data2 is the
// io_timeout written into the leases (0: the daemon default). With
// LS_FLAGS (5.x) only the flags of the existing leases are rewritten
// (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
func cmdWriteLockspace(m *manager.Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		if q.Header.CmdFlags&wire.WriteLSFlags != 0 {
			return c.Reply(q, c.result(m.WriteLockspaceFlags(ctx, lockspaceOf(q))))
		}
		return c.Reply(q, c.result(m.WriteLockspace(ctx, lockspaceOf(q), q.Header.Data2)))
	}
}

// cmdReadLockspaceHost: READ_LOCKSPACE_HOST (5.x): the lockspace, the
// host record of host_id's delta lease and, in data2, its io_timeout; the
// payload is sent on errors too.
func cmdReadLockspaceHost(m *manager.Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		ls, h, io, err := m.ReadLockspaceHost(ctx, lockspaceOf(q))
		ls = fitLockspace(ls)
		return c.send(&wire.Reply{Header: replyHeader(q, c.result(err), io), Lockspace: &ls, Host: &h})
	}
}

// fitLockspace cuts a lockspace read from a request whose name or path
// had no terminator to what the structure holds, so that it can be
// echoed.
func fitLockspace(ls wire.Lockspace) wire.Lockspace {
	if len(ls.Name) > wire.NameLen {
		ls.Name = ls.Name[:wire.NameLen]
	}
	if len(ls.Disk.Path) > wire.PathLen-1 {
		ls.Disk.Path = ls.Disk.Path[:wire.PathLen-1]
	}
	return ls
}

// cmdInitLockspaceHost: INIT_LOCKSPACE_HOST (5.x): write one host's delta
// lease; data2 is its io_timeout.
func cmdInitLockspaceHost(m *manager.Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		return c.Reply(q, c.result(m.InitLockspaceHost(ctx, manager.InitLockspaceHostRequest{
			Lockspace: lockspaceOf(q), Flags: q.Header.CmdFlags, IOTimeout: q.Header.Data2, Record: q.DeltaLeader})))
	}
}

// cmdReadLockspace: read the delta lease of host_id (1 when 0) and reply
// with the lockspace name, host_id, size flags and, in data2, the lease's
// io_timeout (docs/protocol.md "Commands" #20). The lockspace is always sent.
func cmdReadLockspace(m *manager.Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		out, io, err := m.ReadLockspace(ctx, lockspaceOf(q))
		return c.send(&wire.Reply{Header: replyHeader(q, c.result(err), io), Lockspace: &out})
	}
}
