package daemon

import (
	"context"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// registerHandlers installs the lockspace commands that the core's
// LockspaceManager interface does not cover (docs/protocol.md "Commands").
func (m *Lockspaces) registerHandlers(s *Server) {
	s.Handle(client.CmdGetHosts, ClassClose, cmdGetHosts(m))
	s.Handle(client.CmdRenewal, ClassClose, cmdRenewal(m))
	s.Handle(client.CmdSetConfig, ClassClose, cmdSetConfig(m))
	s.Handle(client.CmdRegEvent, ClassClose, cmdRegEvent(m))
	s.Handle(client.CmdEndEvent, ClassClose, cmdEndEvent(m))
	s.Handle(client.CmdSetEvent, ClassWork, cmdSetEvent(m))
	s.Handle(client.CmdWriteLockspace, ClassWork, cmdWriteLockspace(m))
	s.Handle(client.CmdReadLockspace, ClassWork, cmdReadLockspace(m))
	s.Handle(client.CmdExamineLockspace, ClassWork, cmdExamineLockspace(m))
}

// cmdGetHosts: header (length 32 + 32 x count, data = result, data2 =
// count) and the hosts; connection closed (docs/protocol.md "Commands" #23).
func cmdGetHosts(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		ls := lockspaceOf(q)
		hosts, rv := m.getHosts(ls.Name, ls.HostID)
		h := q.Header
		h.Version, h.Data = client.ProtoVersion, uint32(rv)
		h.Length = uint32(client.HeaderSize + client.HostSize*len(hosts))
		h.Data2 = uint32(len(hosts))
		b := h.Bytes()
		for i := range hosts {
			var err error
			if b, err = hosts[i].AppendBinary(b); err != nil {
				return err
			}
		}
		return c.write(b)
	}
}

// cmdRenewal: header (length 32, data2 = io_timeout when history is sent)
// and one RENEWAL record per history entry, oldest first (docs/protocol.md "Commands" #34).
func cmdRenewal(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		h := q.Header
		h.Version, h.Length = client.ProtoVersion, client.HeaderSize
		if m.conf().RenewalHistorySize <= 0 {
			h.Data = 0
			return c.write(h.Bytes())
		}
		hist, io, rv := m.renewals(lockspaceOf(q).Name)
		h.Data = uint32(rv)
		if rv < 0 || len(hist) == 0 {
			return c.write(h.Bytes())
		}
		h.Data2 = uint32(io)
		b := h.Bytes()
		for _, e := range hist {
			rec := client.StateRecord{State: client.State{Type: client.StateRenewal, Data64: e.Timestamp}, Text: e.String()}
			var err error
			if b, err = rec.AppendBinary(b); err != nil {
				return err
			}
		}
		return c.write(b)
	}
}

// cmdSetConfig: SET_CONFIG, config command in header data (docs/protocol.md "Commands" #33).
func cmdSetConfig(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		return c.write(headerReply(q, m.setConfig(lockspaceOf(q).Name, q.Header.Data)))
	}
}

// cmdSetEvent: SET_EVENT (docs/protocol.md "Commands" #32).
func cmdSetEvent(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		var he client.HostEvent
		if q.HostEvent != nil {
			he = *q.HostEvent
		}
		return c.Reply(q, m.setEvent(lockspaceOf(q).Name, he, q.Header.CmdFlags))
	}
}

// cmdExamineLockspace: ask the resource layer to examine the resources
// held in the lockspace; the result is 0 whatever it finds, even for an
// empty name (docs/protocol.md "Commands" #13; checked with sanlock 3.8.5).
func cmdExamineLockspace(m *Lockspaces) Handler {
	return func(_ context.Context, c *Conn, q *client.Request) error {
		m.examine(lockspaceOf(q).Name)
		return c.Reply(q, 0)
	}
}

// ioTimeoutCtx bounds one daemon-side disk operation.
func ioTimeoutCtx(ctx context.Context, secs int) (context.Context, context.CancelFunc) {
	if secs <= 0 {
		secs = DefaultIOTimeout
	}
	return context.WithTimeout(ctx, time.Duration(secs)*time.Second)
}

// cmdWriteLockspace: initialise the delta leases (docs/protocol.md "Commands" #18). data2 is the
// io_timeout written into the leases (0: the daemon default).
func cmdWriteLockspace(m *Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *client.Request) error {
		return c.Reply(q, m.writeLockspace(ctx, lockspaceOf(q), q.Header.Data2))
	}
}

func (m *Lockspaces) writeLockspace(ctx context.Context, ls client.Lockspace, io uint32) int32 {
	if ls.Disk.Path == "" {
		return client.RvENODEV
	}
	if io == 0 {
		io = DefaultIOTimeout // 3.8.5: the daemon's -o is not a default here
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return client.RvENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, m.conf().WriteInitIOTimeout)
	defer cancel()
	err = diskfmt.WriteLockspace(ioctx, dev, int64(ls.Disk.Offset), ls.Flags, ls.Name, uint16(io))
	return int32(diskfmt.CodeOf(err))
}

// cmdReadLockspace: read the delta lease of host_id (1 when 0) and reply
// with the lockspace name, host_id, size flags and, in data2, the lease's
// io_timeout (docs/protocol.md "Commands" #20). The lockspace is always sent.
func cmdReadLockspace(m *Lockspaces) Handler {
	return func(ctx context.Context, c *Conn, q *client.Request) error {
		out, io, rv := m.readLockspace(ctx, lockspaceOf(q))
		h := q.Header
		h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), io
		h.Length = client.HeaderSize + client.LockspaceSize
		b, err := out.AppendBinary(h.Bytes())
		if err != nil {
			return err
		}
		return c.write(b)
	}
}

func (m *Lockspaces) readLockspace(ctx context.Context, ls client.Lockspace) (client.Lockspace, uint32, int32) {
	if ls.HostID == 0 {
		ls.HostID = 1
	}
	if ls.Disk.Path == "" {
		return ls, 0, client.RvENODEV
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return ls, 0, client.RvENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, DefaultIOTimeout)
	defer cancel()
	off := int64(ls.Disk.Offset)
	g, ok := diskfmt.GeometryFromFlags(ls.Flags)
	if !ok {
		l, err := diskfmt.ProbeLeader(ioctx, dev, off)
		if err != nil {
			return ls, 0, int32(diskfmt.CodeOf(err))
		}
		switch {
		case l.Magic != diskfmt.DeltaMagic:
			return ls, 0, int32(diskfmt.ErrLeaderMagic)
		case l.Version&diskfmt.VersionMajorMask != diskfmt.DeltaVersion&diskfmt.VersionMajorMask:
			return ls, 0, int32(diskfmt.ErrLeaderVersion)
		}
		if g, err = diskfmt.GeometryFromLeader(&l); err != nil {
			return ls, 0, client.RvEINVAL
		}
	}
	name := ls.Name
	raw, err := diskfmt.ReadSector(ioctx, dev, off+diskfmt.DeltaSectorOffset(ls.HostID, g.SectorSize), g.SectorSize)
	if err != nil {
		return ls, 0, int32(diskfmt.CodeOf(err))
	}
	if name == "" {
		l, _ := diskfmt.DecodeLeader(raw)
		name = diskfmt.NameString(l.SpaceName[:])
	}
	l, err := diskfmt.VerifyDelta(raw, name)
	if err != nil {
		return ls, 0, int32(diskfmt.CodeOf(err))
	}
	ls.Name = name
	ls.Flags = diskfmt.SizeFlags(g)
	return ls, uint32(l.IOTimeout), 0
}
