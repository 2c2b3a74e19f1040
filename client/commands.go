package client

import "context"

// Version returns the daemon version (0x03080500 for 3.8.5) and the daemon's
// protocol version from the reply header.
func (c *Client) Version(ctx context.Context) (version, proto uint32, err error) {
	p, err := c.result(ctx, NewRequest(CmdVersion, 0, 0, 0))
	if p == nil {
		return 0, 0, err
	}
	return p.Header.Data2, p.Header.Version, err
}

// Status returns the STATUS records; level 0 = everything, or one of the
// State* constants as detail level (docs/protocol.md "Commands").
func (c *Client) Status(ctx context.Context, level uint32) ([]StateRecord, error) {
	return c.records(ctx, NewRequest(CmdStatus, 0, level, 0))
}

// HostStatus returns the HOST records of lockspace ls.
func (c *Client) HostStatus(ctx context.Context, ls string) ([]StateRecord, error) {
	q := NewRequest(CmdHostStatus, 0, 0, 0)
	q.Lockspace = lsName(ls)
	return c.records(ctx, q)
}

// Renewal returns the RENEWAL history records of lockspace ls.
func (c *Client) Renewal(ctx context.Context, ls string) ([]StateRecord, error) {
	q := NewRequest(CmdRenewal, 0, 0, 0)
	q.Lockspace = lsName(ls)
	return c.records(ctx, q)
}

// records sends q and returns the state records of its reply.
func (c *Client) records(ctx context.Context, q *Request) ([]StateRecord, error) {
	p, err := c.result(ctx, q)
	if p == nil {
		return nil, err
	}
	return p.Records, err
}

// GetLockspaces lists lockspaces: joined (flags 0), being removed
// (LSFRem), being added (LSFAdd).
func (c *Client) GetLockspaces(ctx context.Context) ([]Lockspace, error) {
	p, err := c.result(ctx, NewRequest(CmdGetLockspaces, 0, 0, 0))
	if p == nil {
		return nil, err
	}
	return p.Lockspaces, err
}

// GetHosts returns host info of lockspace ls: hostID 0 = every host with a
// non-zero timestamp. -EAGAIN means no host data has been collected yet.
func (c *Client) GetHosts(ctx context.Context, ls string, hostID uint64) ([]Host, error) {
	q := NewRequest(CmdGetHosts, 0, 0, 0)
	q.Lockspace = &Lockspace{Name: ls, HostID: hostID}
	p, err := c.result(ctx, q)
	if p == nil {
		return nil, err
	}
	return p.Hosts, err
}

// AddLockspace joins a lockspace. flags may be AddAsyncFlag; ioTimeout 0 uses
// the daemon default (the value travels in header.data, as
// sanlock_add_lockspace_timeout does).
func (c *Client) AddLockspace(ctx context.Context, ls *Lockspace, flags AddFlags, ioTimeout uint32) error {
	q := NewRequest(CmdAddLockspace, uint32(flags), ioTimeout, 0)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}

// InqLockspace returns nil when joined, *Error -2 when not found and -115
// while being added or removed. flags may be InqWait.
func (c *Client) InqLockspace(ctx context.Context, ls *Lockspace, flags uint32) error {
	q := NewRequest(CmdInqLockspace, flags, 0, 0)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}

// RemLockspace leaves a lockspace; flags RemAsyncFlag and/or RemUnusedFlag.
func (c *Client) RemLockspace(ctx context.Context, ls *Lockspace, flags RemFlags) error {
	q := NewRequest(CmdRemLockspace, uint32(flags), 0, 0)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}

// WriteLockspace initialises the delta leases of a lockspace. ls.Flags may
// carry align/sector flags; maxHosts is sent in data (the daemon ignores
// it), ioTimeout in data2 (0 = daemon default).
func (c *Client) WriteLockspace(ctx context.Context, ls *Lockspace, maxHosts, ioTimeout uint32) error {
	q := NewRequest(CmdWriteLockspace, 0, maxHosts, ioTimeout)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}

// ReadLockspace reads the lockspace leader at ls.Disk and returns the
// lockspace (name, host_id, detected align/sector flags) and the io_timeout
// stored in the lease.
func (c *Client) ReadLockspace(ctx context.Context, ls *Lockspace) (*Lockspace, uint32, error) {
	q := NewRequest(CmdReadLockspace, 0, 0, 0)
	q.Lockspace = ls
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, 0, err
	}
	return p.Lockspace, p.Header.Data2, nil
}

// Shutdown asks the daemon to exit (force: kill lease holders and drop all
// lockspaces). There is no reply; a non-forced shutdown with lockspaces is
// silently ignored by the daemon.
func (c *Client) Shutdown(ctx context.Context, force bool) error {
	_, err := c.Do(ctx, NewRequest(CmdShutdown, 0, boolData(force), 0))
	return err
}

// ShutdownWait is Shutdown that waits for the daemon to exit; it returns
// *Error -16 at once when refused.
func (c *Client) ShutdownWait(ctx context.Context, force bool) error {
	_, err := c.result(ctx, NewRequest(CmdShutdownWait, 0, boolData(force), 0))
	return err
}

// LogDump returns the daemon's in-memory debug log.
func (c *Client) LogDump(ctx context.Context) ([]byte, error) {
	p, err := c.result(ctx, NewRequest(CmdLogDump, 0, 0, 0))
	if p == nil {
		return nil, err
	}
	return p.Data, err
}

// Align returns the lease align size of the disk (1048576 for 512-byte
// sectors, 8388608 for 4096).
func (c *Client) Align(ctx context.Context, d *Disk) (int, error) {
	q := NewRequest(CmdAlign, 0, 0, 0)
	q.Disk = d
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// SetConfig sets a per-lockspace config value (ConfigUsed ... ConfigUnusedByOrphans).
func (c *Client) SetConfig(ctx context.Context, ls string, value uint32) error {
	q := NewRequest(CmdSetConfig, 0, value, 0)
	q.Lockspace = lsName(ls)
	_, err := c.result(ctx, q)
	return err
}

// SetEvent sends an event to other hosts of lockspace ls (flags Setev*).
func (c *Client) SetEvent(ctx context.Context, ls string, he HostEvent, flags uint32) error {
	q := NewRequest(CmdSetEvent, flags, 0, 0)
	q.Lockspace = lsName(ls)
	q.HostEvent = &he
	_, err := c.result(ctx, q)
	return err
}

// Request asks the holder of a resource to release it (docs/protocol.md "Commands"):
// mode is ForceKill, ForceGraceful or ForceNone; flags may be
// RequestNextLVer, else res.LVer with ResLVer in res.Flags names the
// version.
func (c *Client) Request(ctx context.Context, res *Resource, flags uint32, mode ForceMode) error {
	q := NewRequest(CmdRequest, flags, uint32(mode), 0)
	q.Resources = []Resource{*res}
	_, err := c.result(ctx, q)
	return err
}

// ExamineLockspace asks the daemon to examine the resources of a lockspace.
func (c *Client) ExamineLockspace(ctx context.Context, ls *Lockspace) error {
	q := NewRequest(CmdExamineLockspace, 0, 0, 0)
	q.Lockspace = ls
	_, err := c.result(ctx, q)
	return err
}

// ExamineResource asks the daemon to examine one resource (names only).
func (c *Client) ExamineResource(ctx context.Context, res *Resource) error {
	q := NewRequest(CmdExamineResource, 0, 0, 0)
	q.Resources = []Resource{*res}
	_, err := c.result(ctx, q)
	return err
}

// WriteResource initialises a resource lease. Like libsanlock it sends
// maxHosts in data and numHosts in data2; the 3.8.5 daemon uses data as
// num_hosts (docs/protocol.md "Commands"). flags may be WriteClear.
func (c *Client) WriteResource(ctx context.Context, res *Resource, maxHosts, numHosts, flags uint32) error {
	q := NewRequest(CmdWriteResource, flags, maxHosts, numHosts)
	q.Resources = []Resource{*res}
	_, err := c.result(ctx, q)
	return err
}

// ReadResource reads the leader of the resource lease at res.Disks[0].
func (c *Client) ReadResource(ctx context.Context, res *Resource) (*Resource, error) {
	q := NewRequest(CmdReadResource, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, err
	}
	return p.Resource, nil
}

// ReadResourceOwners returns the resource and its current owners.
func (c *Client) ReadResourceOwners(ctx context.Context, res *Resource) (*Resource, []Host, error) {
	q := NewRequest(CmdReadResourceOwners, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, nil, err
	}
	return p.Resource, p.Hosts, nil
}

// SetLVB sets the lock value block of a resource held with AcquireLVB.
func (c *Client) SetLVB(ctx context.Context, res *Resource, lvb []byte) error {
	q := NewRequest(CmdSetLVB, 0, 0, 0)
	q.Resources = []Resource{*res}
	q.LVB = lvb
	_, err := c.result(ctx, q)
	return err
}

// GetLVB returns up to size bytes of the lock value block (data2 = 0 as in
// libsanlock, so the daemon sends one sector).
func (c *Client) GetLVB(ctx context.Context, res *Resource, size int) ([]byte, error) {
	q := NewRequest(CmdGetLVB, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, err
	}
	d := p.Data
	if size >= 0 && len(d) > size {
		d = d[:size]
	}
	return d, nil
}

// FormatRIndex formats a resource index.
func (c *Client) FormatRIndex(ctx context.Context, ri *RIndex, flags uint32) error {
	q := NewRequest(CmdFormatRIndex, flags, 0, 0)
	q.RIndex = ri
	_, err := c.result(ctx, q)
	return err
}

// RebuildRIndex rebuilds a resource index (flags may be RXNoLockspace).
func (c *Client) RebuildRIndex(ctx context.Context, ri *RIndex, flags uint32) error {
	q := NewRequest(CmdRebuildRIndex, flags, 0, 0)
	q.RIndex = ri
	_, err := c.result(ctx, q)
	return err
}

func (c *Client) rindexEntry(ctx context.Context, cmd Cmd, ri *RIndex, flags uint32, re *REntry, data, data2 uint32) (*REntry, error) {
	q := NewRequest(cmd, flags, data, data2)
	q.RIndex = ri
	q.REntry = re
	p, err := c.result(ctx, q)
	if p == nil || err != nil {
		return nil, err
	}
	return p.REntry, nil
}

// CreateResource allocates and initialises a resource lease in the rindex;
// the returned entry holds its offset.
func (c *Client) CreateResource(ctx context.Context, ri *RIndex, flags uint32, re *REntry, maxHosts, numHosts uint32) (*REntry, error) {
	return c.rindexEntry(ctx, CmdCreateResource, ri, flags, re, maxHosts, numHosts)
}

// DeleteResource removes a resource from the rindex.
func (c *Client) DeleteResource(ctx context.Context, ri *RIndex, flags uint32, re *REntry) error {
	_, err := c.rindexEntry(ctx, CmdDeleteResource, ri, flags, re, 0, 0)
	return err
}

// LookupRIndex finds an entry by name or offset (empty name and offset 0:
// the first free slot).
func (c *Client) LookupRIndex(ctx context.Context, ri *RIndex, flags uint32, re *REntry) (*REntry, error) {
	return c.rindexEntry(ctx, CmdLookupRIndex, ri, flags, re, 0, 0)
}

// UpdateRIndex adds (RXUpAdd) or removes (RXUpRem) an rindex entry.
func (c *Client) UpdateRIndex(ctx context.Context, ri *RIndex, flags uint32, re *REntry) (*REntry, error) {
	return c.rindexEntry(ctx, CmdUpdateRIndex, ri, flags, re, 0, 0)
}

// SetHostDeadExt is the only set_host subcommand (SANLK_SET_HOST_DEAD_EXT).
const SetHostDeadExt = 1

// SetHost is sanlock_set_host (5.x): in lockspace ls (name and our
// host_id in it), apply subcommand cmd (SetHostDeadExt) to host h
// (h.HostID; h.Generation the incarnation to mark, 0 = the one on disk).
// flags and ioTimeout are sent as the library sends them (cmd_flags and
// data2). Only after the host has been fenced: on a NO_TIMEOUT lockspace
// the DEAD_EXT mark lets other hosts take its leases at once.
func (c *Client) SetHost(ctx context.Context, ls *Lockspace, cmd, flags, ioTimeout uint32, h Host) error {
	q := NewRequest(CmdSetHost, flags, cmd, ioTimeout)
	q.Lockspace = ls
	q.Host = &h
	_, err := c.result(ctx, q)
	return err
}
