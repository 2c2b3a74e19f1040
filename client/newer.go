package client

import (
	"context"

	"github.com/gosanlock/gosanlock/wire"
)

// The commands and flags of sanlock 3.9.5 and 5.x (docs/protocol.md
// "Commands of 3.9.5 and 5.1.1"). A 3.8.5 daemon does not know 41-43 and
// leaves the caller waiting: use a Client with a Timeout against it.
const (
	CmdAcquire2          = wire.CmdAcquire2
	CmdReadLockspaceHost = wire.CmdReadLockspaceHost
	CmdInitLockspaceHost = wire.CmdInitLockspaceHost

	AddNoDelay      = wire.AddNoDelay
	AddNoWatchdog   = wire.AddNoWatchdog
	GetHostsLocal   = wire.GetHostsLocal
	WriteLSFlags    = wire.WriteLSFlags
	InitHostUseCAW  = wire.InitHostUseCAW
	InitHostNoCAW   = wire.InitHostNoCAW
	ForClientID     = wire.ForClientID
	RelNoDisk       = wire.RelNoDisk
	ConfigIOTimeout = wire.ConfigIOTimeout
)

// HeldBy is the owner ACQUIRE2 names when a lease is held by another host:
// its host record (host_id, generation, the leader's timestamp; Flags =
// the daemon's view of its state) and its host name ("" when the daemon
// has not read it yet).
type HeldBy struct {
	Host Host
	Name string
}

func acquire2Result(p *Reply, err error) (*HeldBy, error) {
	if err != nil {
		return nil, err
	}
	if p.Host != nil {
		return &HeldBy{Host: *p.Host, Name: p.OwnerName}, p.Err()
	}
	return nil, p.Err()
}

// Acquire2 is Acquire (data2 = pid; with ForClientID in flags a client
// index) that also returns the owner when the daemon answers -243 or -249.
func (c *Client) Acquire2(ctx context.Context, pid int, res []Resource, flags AcquireFlags, opt *Options) (*HeldBy, error) {
	q := acquireReq(pidData(pid), res, flags, opt)
	q.Header.Cmd = CmdAcquire2
	return acquire2Result(c.Do(ctx, q))
}

// Acquire2 is Acquire for this registered process, with the owner of a
// lease held elsewhere (see Client.Acquire2).
func (g *Reg) Acquire2(ctx context.Context, res []Resource, flags AcquireFlags, opt *Options) (*HeldBy, error) {
	q := acquireReq(self, res, flags, opt)
	q.Header.Cmd = CmdAcquire2
	return acquire2Result(g.do(ctx, q))
}

// InquireClient is Inquire of the client with index ci (ci= in STATUS;
// FOR_CLIENT_ID).
func (c *Client) InquireClient(ctx context.Context, ci int) (Inquiry, error) {
	return inquiryOf(c.Do(ctx, NewRequest(CmdInquire, ForClientID, 0, pidData(ci))))
}

// ReadLockspaceHost reads the delta lease of ls.HostID (1 when 0) at
// ls.Disk: the lockspace (name, flags as on disk), the host's record
// (host_id, generation, timestamp, io_timeout) and the lease's io_timeout.
func (c *Client) ReadLockspaceHost(ctx context.Context, ls *Lockspace, flags uint32) (*Lockspace, *Host, uint32, error) {
	q := NewRequest(CmdReadLockspaceHost, flags, 0, 0)
	q.Lockspace = ls
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, nil, 0, err
	}
	return p.Lockspace, p.Host, p.Header.Data2, nil
}

// InitLockspaceHost writes the delta lease of ls.HostID with the given
// generation, host name and timestamp (flags InitHostUseCAW or
// InitHostNoCAW; ioTimeout 0: the daemon's).
func (c *Client) InitLockspaceHost(ctx context.Context, ls *Lockspace, flags, ioTimeout uint32, generation uint64, name string, timestamp uint64) error {
	q := NewRequest(CmdInitLockspaceHost, flags, 0, ioTimeout)
	q.Lockspace = ls
	rec := make([]byte, wire.DeltaLeaderSize)
	le := func(off int, v uint64) {
		for i := 0; i < 8; i++ {
			rec[off+i] = byte(v >> (8 * i))
		}
	}
	le(32, ls.HostID)
	le(40, generation)
	if len(name) > wire.NameLen {
		return wire.ErrNameTooLong
	}
	copy(rec[104:104+wire.NameLen], name)
	le(152, timestamp)
	q.DeltaLeader = rec
	_, err := c.result(ctx, q)
	return err
}

// GetLocalHost is GET_HOSTS LOCAL: this host's own record in lockspace ls.
func (c *Client) GetLocalHost(ctx context.Context, ls string) (*Host, error) {
	q := NewRequest(CmdGetHosts, GetHostsLocal, 0, 0)
	q.Lockspace = lsName(ls)
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, err
	}
	if len(p.Hosts) == 0 {
		return nil, nil
	}
	return &p.Hosts[0], nil
}

// SetIOTimeout is SET_CONFIG IO_TIMEOUT: lockspace ls renews with
// io_timeout seconds from its next renewal.
func (c *Client) SetIOTimeout(ctx context.Context, ls string, ioTimeout uint32) error {
	q := NewRequest(CmdSetConfig, 0, ConfigIOTimeout, ioTimeout)
	q.Lockspace = lsName(ls)
	_, err := c.result(ctx, q)
	return err
}

// WriteLockspaceFlags is WRITE_LOCKSPACE LS_FLAGS: rewrite the leader
// flags of the existing lockspace at ls.Disk to ls.Flags (which must
// carry an ALIGN and a SECTOR flag).
func (c *Client) WriteLockspaceFlags(ctx context.Context, ls *Lockspace, ioTimeout uint32) error {
	q := NewRequest(CmdWriteLockspace, WriteLSFlags, 0, ioTimeout)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}
