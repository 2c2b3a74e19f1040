// Package client implements a Go client for the sanlock 3.8.5 client/daemon
// socket protocol (described in docs/protocol.md); the codec itself is
// package wire, whose types and constants this package re-exports
// (wire.go), so users need only this import.
//
//   - [Client], a libsanlock-like API: one new connection per call, except the
//     registered connection ([Reg]) and event listeners ([EventConn]).
//   - the frame codec, re-exported from package wire: [Header], the fixed
//     structures ([Disk], [Resource], [Lockspace], [Options], [Host], ...),
//     [Request] / [Reply] and the text forms.
//
// Result codes travel in data as i32; negative values are reported as *Error,
// which matches the per-code sentinels ([ErrAcquireIDLive], [ErrNotFound],
// ...) and syscall.Errno values with errors.Is.
//
// Contexts: [Client.WithContext] and [Reg.WithContext] return views whose
// calls are bounded by a context (dial, send, wait for the reply); the *Ctx
// methods ([Reg.AcquireCtx], [Client.AddLockspaceCtx], ...) take the context
// and typed flags ([AcquireFlags], [ReleaseFlags], [AddFlags], [RemFlags],
// [ForceMode]) directly. The older uint32-flag methods are unchanged.
//
// Programs that hold leases should normally use the lease package, which
// builds sessions, blocking acquire, fencing tokens and loss notices on top
// of this one.
package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultRunDir is used when SANLOCK_RUN_DIR is unset (docs/protocol.md "Transport").
const DefaultRunDir = "/run/sanlock"

// SockName is the socket file name inside the run directory.
const SockName = "sanlock.sock"

// RunDir returns $SANLOCK_RUN_DIR, or DefaultRunDir when it is unset or empty.
func RunDir() string {
	if d := os.Getenv("SANLOCK_RUN_DIR"); d != "" {
		return d
	}
	return DefaultRunDir
}

// Client talks to a sanlock daemon. Like libsanlock, every call opens its own
// connection and closes it afterwards; the exceptions are Register (returns a
// *Reg that keeps its connection) and RegEvent (returns an *EventConn).
// A Client is safe for concurrent use.
type Client struct {
	// SockPath is the daemon socket, $runDir/sanlock.sock.
	SockPath string
	// Timeout, when non-zero, bounds each call's I/O (libsanlock has no
	// timeout; a non-async ADD_LOCKSPACE takes about 2 x io_timeout).
	Timeout time.Duration

	// ctx, when set by WithContext, bounds every call made through this
	// copy: dialing, sending and waiting for the reply.
	ctx context.Context
}

// Dial returns a client for the daemon whose run directory is runDir ("" =
// RunDir()). It does not connect: each call connects on its own, so a
// missing daemon shows up as *Error{-2} (ENOENT) or {-111} (ECONNREFUSED)
// from the first call, as with libsanlock.
func Dial(runDir string) (*Client, error) {
	if runDir == "" {
		runDir = RunDir()
	}
	p := filepath.Join(runDir, SockName)
	if len(p) > 107 {
		return nil, fmt.Errorf("sanlock: socket path %q longer than 107 bytes", p)
	}
	return &Client{SockPath: p}, nil
}

// connErr maps a dial/transport error to -errno like libsanlock, keeping
// other errors unchanged.
func connErr(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return &Error{Code: -int(en)}
	}
	return err
}

func (c *Client) connect() (*net.UnixConn, error) {
	ctx := c.context()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.SockPath)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connErr(err)
	}
	conn := nc.(*net.UnixConn)
	if c.Timeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(c.Timeout))
	}
	return conn, nil
}

// exchange sends q on conn and reads the reply (if the command has one).
func exchange(conn net.Conn, q *Request) (*Reply, error) {
	b, err := q.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(b); err != nil {
		return nil, connErr(err)
	}
	if !HasReply(q.Header.Cmd) {
		return nil, nil
	}
	p, err := ReadReply(conn, q.Header.Cmd)
	if err != nil {
		return p, fmt.Errorf("sanlock: %s reply: %w", q.Header.Cmd.DebugName(), err)
	}
	return p, nil
}

// Do sends q on a new connection, reads the reply, and closes the
// connection. It returns transport errors only; the result code is in the
// reply.
func (c *Client) Do(q *Request) (*Reply, error) {
	conn, err := c.connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := interruptOnDone(c.context(), conn)
	p, err := exchange(conn, q)
	if stop() && err != nil {
		// The context ended the exchange: report that, not the I/O error.
		return p, c.context().Err()
	}
	return p, err
}

// result runs q and converts a negative result into *Error.
func (c *Client) result(q *Request) (*Reply, error) {
	p, err := c.Do(q)
	if err != nil {
		return p, err
	}
	return p, p.Err()
}

func lsName(name string) *Lockspace { return &Lockspace{Name: name} }

func boolData(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// pidData returns data2 for a pid-targeting command.
func pidData(pid int) uint32 { return uint32(int32(pid)) }

// Version returns the daemon version (0x03080500 for 3.8.5) and the daemon's
// protocol version from the reply header.
func (c *Client) Version() (version, proto uint32, err error) {
	p, err := c.result(NewRequest(CmdVersion, 0, 0, 0))
	if p == nil {
		return 0, 0, err
	}
	return p.Header.Data2, p.Header.Version, err
}

// Status returns the STATUS records; level 0 = everything, or one of the
// State* constants as detail level (docs/protocol.md "Commands").
func (c *Client) Status(level uint32) ([]StateRecord, error) {
	return c.records(NewRequest(CmdStatus, 0, level, 0))
}

// HostStatus returns the HOST records of lockspace ls.
func (c *Client) HostStatus(ls string) ([]StateRecord, error) {
	q := NewRequest(CmdHostStatus, 0, 0, 0)
	q.Lockspace = lsName(ls)
	return c.records(q)
}

// Renewal returns the RENEWAL history records of lockspace ls.
func (c *Client) Renewal(ls string) ([]StateRecord, error) {
	q := NewRequest(CmdRenewal, 0, 0, 0)
	q.Lockspace = lsName(ls)
	return c.records(q)
}

// Reexec asks the daemon to hand over to the binary at path ("" = its
// own binary, re-read from disk; docs/upgrade.md). nil means the new
// image serves; on failure the error carries the daemon's reason and the
// old image serves on.
func (c *Client) Reexec(path string) error {
	q := NewRequest(CmdReexec, 0, 0, 0)
	q.Disk = &Disk{Path: path}
	p, err := c.result(q)
	if err != nil && p != nil && len(p.Records) > 0 && p.Records[0].Text != "" {
		return fmt.Errorf("%w: %s", err, p.Records[0].Text)
	}
	return err
}

// records sends q and returns the state records of its reply.
func (c *Client) records(q *Request) ([]StateRecord, error) {
	p, err := c.result(q)
	if p == nil {
		return nil, err
	}
	return p.Records, err
}

// GetLockspaces lists lockspaces: joined (flags 0), being removed
// (LSFRem), being added (LSFAdd).
func (c *Client) GetLockspaces() ([]Lockspace, error) {
	p, err := c.result(NewRequest(CmdGetLockspaces, 0, 0, 0))
	if p == nil {
		return nil, err
	}
	return p.Lockspaces, err
}

// GetHosts returns host info of lockspace ls: hostID 0 = every host with a
// non-zero timestamp. -EAGAIN means no host data has been collected yet.
func (c *Client) GetHosts(ls string, hostID uint64) ([]Host, error) {
	q := NewRequest(CmdGetHosts, 0, 0, 0)
	q.Lockspace = &Lockspace{Name: ls, HostID: hostID}
	p, err := c.result(q)
	if p == nil {
		return nil, err
	}
	return p.Hosts, err
}

// AddLockspace joins a lockspace. flags may be AddAsync; ioTimeout 0 uses
// the daemon default (the value travels in header.data, as
// sanlock_add_lockspace_timeout does).
func (c *Client) AddLockspace(ls *Lockspace, flags, ioTimeout uint32) error {
	q := NewRequest(CmdAddLockspace, flags, ioTimeout, 0)
	q.Lockspace = ls
	_, err := c.result(q)
	return err
}

// InqLockspace returns nil when joined, *Error -2 when not found and -115
// while being added or removed. flags may be InqWait.
func (c *Client) InqLockspace(ls *Lockspace, flags uint32) error {
	q := NewRequest(CmdInqLockspace, flags, 0, 0)
	q.Lockspace = ls
	_, err := c.result(q)
	return err
}

// RemLockspace leaves a lockspace; flags RemAsync and/or RemUnused.
func (c *Client) RemLockspace(ls *Lockspace, flags uint32) error {
	q := NewRequest(CmdRemLockspace, flags, 0, 0)
	q.Lockspace = ls
	_, err := c.result(q)
	return err
}

// WriteLockspace initialises the delta leases of a lockspace. ls.Flags may
// carry align/sector flags; maxHosts is sent in data (the daemon ignores
// it), ioTimeout in data2 (0 = daemon default).
func (c *Client) WriteLockspace(ls *Lockspace, maxHosts, ioTimeout uint32) error {
	q := NewRequest(CmdWriteLockspace, 0, maxHosts, ioTimeout)
	q.Lockspace = ls
	_, err := c.result(q)
	return err
}

// ReadLockspace reads the lockspace leader at ls.Disk and returns the
// lockspace (name, host_id, detected align/sector flags) and the io_timeout
// stored in the lease.
func (c *Client) ReadLockspace(ls *Lockspace) (*Lockspace, uint32, error) {
	q := NewRequest(CmdReadLockspace, 0, 0, 0)
	q.Lockspace = ls
	p, err := c.result(q)
	if p == nil || err != nil {
		return nil, 0, err
	}
	return p.Lockspace, p.Header.Data2, nil
}

// Shutdown asks the daemon to exit (force: kill lease holders and drop all
// lockspaces). There is no reply; a non-forced shutdown with lockspaces is
// silently ignored by the daemon.
func (c *Client) Shutdown(force bool) error {
	_, err := c.Do(NewRequest(CmdShutdown, 0, boolData(force), 0))
	return err
}

// ShutdownWait is Shutdown that waits for the daemon to exit; it returns
// *Error -16 at once when refused.
func (c *Client) ShutdownWait(force bool) error {
	_, err := c.result(NewRequest(CmdShutdownWait, 0, boolData(force), 0))
	return err
}

// LogDump returns the daemon's in-memory debug log.
func (c *Client) LogDump() ([]byte, error) {
	p, err := c.result(NewRequest(CmdLogDump, 0, 0, 0))
	if p == nil {
		return nil, err
	}
	return p.Data, err
}

// Align returns the lease align size of the disk (1048576 for 512-byte
// sectors, 8388608 for 4096).
func (c *Client) Align(d *Disk) (int, error) {
	q := NewRequest(CmdAlign, 0, 0, 0)
	q.Disk = d
	p, err := c.result(q)
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// SetConfig sets a per-lockspace config value (ConfigUsed ... ConfigUnusedByOrphans).
func (c *Client) SetConfig(ls string, value uint32) error {
	q := NewRequest(CmdSetConfig, 0, value, 0)
	q.Lockspace = lsName(ls)
	_, err := c.result(q)
	return err
}

// SetEvent sends an event to other hosts of lockspace ls (flags Setev*).
func (c *Client) SetEvent(ls string, he HostEvent, flags uint32) error {
	q := NewRequest(CmdSetEvent, flags, 0, 0)
	q.Lockspace = lsName(ls)
	q.HostEvent = &he
	_, err := c.result(q)
	return err
}

// Request asks the holder of a resource to release it (docs/protocol.md "Commands"):
// forceMode is ReqForce, ReqGraceful or 0; flags may be RequestNextLVer,
// else res.LVer with ResLVer in res.Flags names the version.
func (c *Client) Request(res *Resource, flags, forceMode uint32) error {
	q := NewRequest(CmdRequest, flags, forceMode, 0)
	q.Resources = []Resource{*res}
	_, err := c.result(q)
	return err
}

// ExamineLockspace asks the daemon to examine the resources of a lockspace.
func (c *Client) ExamineLockspace(ls *Lockspace) error {
	q := NewRequest(CmdExamineLockspace, 0, 0, 0)
	q.Lockspace = ls
	_, err := c.result(q)
	return err
}

// ExamineResource asks the daemon to examine one resource (names only).
func (c *Client) ExamineResource(res *Resource) error {
	q := NewRequest(CmdExamineResource, 0, 0, 0)
	q.Resources = []Resource{*res}
	_, err := c.result(q)
	return err
}

// WriteResource initialises a resource lease. Like libsanlock it sends
// maxHosts in data and numHosts in data2; the 3.8.5 daemon uses data as
// num_hosts (docs/protocol.md "Commands"). flags may be WriteClear.
func (c *Client) WriteResource(res *Resource, maxHosts, numHosts, flags uint32) error {
	q := NewRequest(CmdWriteResource, flags, maxHosts, numHosts)
	q.Resources = []Resource{*res}
	_, err := c.result(q)
	return err
}

// ReadResource reads the leader of the resource lease at res.Disks[0].
func (c *Client) ReadResource(res *Resource) (*Resource, error) {
	q := NewRequest(CmdReadResource, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(q)
	if p == nil || err != nil {
		return nil, err
	}
	return p.Resource, nil
}

// ReadResourceOwners returns the resource and its current owners.
func (c *Client) ReadResourceOwners(res *Resource) (*Resource, []Host, error) {
	q := NewRequest(CmdReadResourceOwners, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(q)
	if p == nil || err != nil {
		return nil, nil, err
	}
	return p.Resource, p.Hosts, nil
}

// SetLVB sets the lock value block of a resource held with AcquireLVB.
func (c *Client) SetLVB(res *Resource, lvb []byte) error {
	q := NewRequest(CmdSetLVB, 0, 0, 0)
	q.Resources = []Resource{*res}
	q.LVB = lvb
	_, err := c.result(q)
	return err
}

// GetLVB returns up to size bytes of the lock value block (data2 = 0 as in
// libsanlock, so the daemon sends one sector).
func (c *Client) GetLVB(res *Resource, size int) ([]byte, error) {
	q := NewRequest(CmdGetLVB, 0, 0, 0)
	q.Resources = []Resource{*res}
	p, err := c.result(q)
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
func (c *Client) FormatRIndex(ri *RIndex, flags uint32) error {
	q := NewRequest(CmdFormatRIndex, flags, 0, 0)
	q.RIndex = ri
	_, err := c.result(q)
	return err
}

// RebuildRIndex rebuilds a resource index (flags may be RXNoLockspace).
func (c *Client) RebuildRIndex(ri *RIndex, flags uint32) error {
	q := NewRequest(CmdRebuildRIndex, flags, 0, 0)
	q.RIndex = ri
	_, err := c.result(q)
	return err
}

func (c *Client) rindexEntry(cmd Cmd, ri *RIndex, flags uint32, re *REntry, data, data2 uint32) (*REntry, error) {
	q := NewRequest(cmd, flags, data, data2)
	q.RIndex = ri
	q.REntry = re
	p, err := c.result(q)
	if p == nil || err != nil {
		return nil, err
	}
	return p.REntry, nil
}

// CreateResource allocates and initialises a resource lease in the rindex;
// the returned entry holds its offset.
func (c *Client) CreateResource(ri *RIndex, flags uint32, re *REntry, maxHosts, numHosts uint32) (*REntry, error) {
	return c.rindexEntry(CmdCreateResource, ri, flags, re, maxHosts, numHosts)
}

// DeleteResource removes a resource from the rindex.
func (c *Client) DeleteResource(ri *RIndex, flags uint32, re *REntry) error {
	_, err := c.rindexEntry(CmdDeleteResource, ri, flags, re, 0, 0)
	return err
}

// LookupRIndex finds an entry by name or offset (empty name and offset 0:
// the first free slot).
func (c *Client) LookupRIndex(ri *RIndex, flags uint32, re *REntry) (*REntry, error) {
	return c.rindexEntry(CmdLookupRIndex, ri, flags, re, 0, 0)
}

// UpdateRIndex adds (RXUpAdd) or removes (RXUpRem) an rindex entry.
func (c *Client) UpdateRIndex(ri *RIndex, flags uint32, re *REntry) (*REntry, error) {
	return c.rindexEntry(CmdUpdateRIndex, ri, flags, re, 0, 0)
}

// ---- lease commands that target a registered process ----

// acquireReq builds ACQUIRE for data2 (pid, or -1 for self).
func acquireReq(data2 uint32, res []Resource, flags uint32, opt *Options) *Request {
	q := NewRequest(CmdAcquire, flags, uint32(len(res)), data2)
	q.Resources = res
	q.Options = opt
	return q
}

func releaseReq(data2 uint32, res []Resource, flags uint32) *Request {
	q := NewRequest(CmdRelease, flags, uint32(len(res)), data2)
	q.Resources = res
	if flags&RelAll != 0 {
		q.Resources = nil
		q.Header.Data = 0
	}
	return q
}

func convertReq(data2 uint32, res *Resource, flags uint32) *Request {
	q := NewRequest(CmdConvert, flags, 0, data2)
	q.Resources = []Resource{*res}
	return q
}

// inquireResult converts an INQUIRE reply to (state, count, err). For the
// formatting errors the count is still reported (docs/protocol.md "Commands").
func inquireResult(p *Reply, err error) (string, int, error) {
	if p == nil {
		return "", 0, err
	}
	if err == nil {
		err = p.Err()
	}
	return string(p.Data), int(p.Header.Data2), err
}

// Acquire acquires leases for the registered process pid (on a new
// connection, data2 = pid).
func (c *Client) Acquire(pid int, res []Resource, flags uint32, opt *Options) error {
	_, err := c.result(acquireReq(pidData(pid), res, flags, opt))
	return err
}

// Release releases leases of process pid. With RelOrphan the result is the
// number of orphans released.
func (c *Client) Release(pid int, res []Resource, flags uint32) (int, error) {
	p, err := c.result(releaseReq(pidData(pid), res, flags))
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// Inquire returns the state string of the leases held by pid and their count.
func (c *Client) Inquire(pid int) (string, int, error) {
	return inquireResult(c.Do(NewRequest(CmdInquire, 0, 0, pidData(pid))))
}

// Convert changes the mode of a lease held by pid (ResShared in res.Flags
// selects shared).
func (c *Client) Convert(pid int, res *Resource, flags uint32) error {
	_, err := c.result(convertReq(pidData(pid), res, flags))
	return err
}

// Reg is a registered connection (sanlock_register): the lease-holding
// handle of this process. Leases acquired through it are released by the
// daemon when it is closed. Calls are serialised.
//
// A Reg made by WithContext shares the connection and bounds each call by its
// context (see WithContext).
type Reg struct {
	st  *regState
	ctx context.Context
}

// regState is the connection shared by a Reg and its WithContext copies.
// sem (capacity 1) serialises exchanges; unlike a mutex, waiting for it can
// be abandoned when a context ends.
type regState struct {
	sem  chan struct{}
	conn *net.UnixConn
}

// Register connects and sends REGISTER (no reply is read, docs/protocol.md
// "Registration"). The daemon records this process (SO_PEERCRED) as the
// owner of the connection.
func (c *Client) Register() (*Reg, error) {
	ctx := c.context()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.SockPath)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connErr(err)
	}
	conn := nc.(*net.UnixConn)
	q := NewRequest(CmdRegister, 0, 0, 0)
	if _, err := exchange(conn, q); err != nil {
		conn.Close()
		return nil, err
	}
	return &Reg{st: &regState{conn: conn, sem: make(chan struct{}, 1)}}, nil
}

// Conn returns the underlying connection (e.g. to pass the fd to a child
// with File()).
func (g *Reg) Conn() *net.UnixConn { return g.st.conn }

// Close closes the registered connection; the daemon then releases the
// leases (persistent ones become orphans).
func (g *Reg) Close() error { return g.st.conn.Close() }

func (g *Reg) do(q *Request) (*Reply, error) { return g.doLate(q, nil) }

func (g *Reg) result(q *Request) (*Reply, error) {
	p, err := g.do(q)
	if err != nil {
		return p, err
	}
	return p, p.Err()
}

const self = 0xFFFFFFFF // data2 = -1: the client registered on this connection

// Acquire acquires leases for this registered process.
func (g *Reg) Acquire(res []Resource, flags uint32, opt *Options) error {
	p, err := g.doLate(acquireReq(self, res, flags, opt), g.releaseLate(res))
	if err != nil {
		return err
	}
	return p.Err()
}

// Release releases leases of this process (see Client.Release).
func (g *Reg) Release(res []Resource, flags uint32) (int, error) {
	p, err := g.result(releaseReq(self, res, flags))
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// Inquire returns the state string of the leases held and their count.
func (g *Reg) Inquire() (string, int, error) {
	return inquireResult(g.do(NewRequest(CmdInquire, 0, 0, self)))
}

// Convert changes the mode of a held lease.
func (g *Reg) Convert(res *Resource, flags uint32) error {
	_, err := g.result(convertReq(self, res, flags))
	return err
}

// Killpath sets the program the daemon runs instead of SIGTERM (flags may be
// KillpathPID). Only the registered connection itself can set it.
func (g *Reg) Killpath(path, args string, flags uint32) error {
	q := NewRequest(CmdKillpath, flags, 0, self)
	q.Killpath = &Killpath{Path: path, Args: args}
	_, err := g.result(q)
	return err
}

// Restrict sets restrict flags on this connection. After RestrictAll the
// daemon ignores everything sent on it, so no reply would be read for later
// commands.
func (g *Reg) Restrict(flags uint32) error {
	_, err := g.result(NewRequest(CmdRestrict, flags, 0, self))
	return err
}

// EventConn is an event listener connection (REG_EVENT, docs/protocol.md "Events").
type EventConn struct {
	conn *net.UnixConn
	ls   string
}

// RegEvent registers an event listener for lockspace ls.
func (c *Client) RegEvent(ls string) (*EventConn, error) {
	ctx := c.context()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.SockPath)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connErr(err)
	}
	conn := nc.(*net.UnixConn)
	q := NewRequest(CmdRegEvent, 0, 0, 0)
	q.Lockspace = lsName(ls)
	q.HostEvent = &HostEvent{}
	stop := interruptOnDone(ctx, conn)
	p, err := exchange(conn, q)
	if stop() && err != nil {
		err = ctx.Err()
	}
	if err == nil {
		err = p.Err()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &EventConn{conn: conn, ls: ls}, nil
}

// Conn returns the listener connection (to poll it).
func (e *EventConn) Conn() *net.UnixConn { return e.conn }

// GetEvent does one non-blocking read of an event_cb, like sanlock_get_event:
// *Error -11 (EAGAIN) when nothing is pending, io.EOF when the daemon closed
// the listener.
func (e *EventConn) GetEvent() (EventCB, error) {
	var ev EventCB
	var buf [EventCBSize]byte
	rc, err := e.conn.SyscallConn()
	if err != nil {
		return ev, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_DONTWAIT)
		return true
	})
	if err != nil {
		return ev, err
	}
	if rerr != nil {
		if errors.Is(rerr, syscall.EAGAIN) {
			return ev, &Error{Code: RvEAGAIN}
		}
		return ev, connErr(rerr)
	}
	if n == 0 {
		return ev, io.EOF
	}
	if n != EventCBSize {
		// A partial record: wait for the rest.
		if _, err := io.ReadFull(e.conn, buf[n:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return ev, err
		}
	}
	_ = ev.UnmarshalBinary(buf[:])
	return ev, nil
}

// WaitEvent blocks until an event arrives or the timeout passes (0 = no
// timeout).
func (e *EventConn) WaitEvent(timeout time.Duration) (EventCB, error) {
	var ev EventCB
	if timeout > 0 {
		_ = e.conn.SetReadDeadline(time.Now().Add(timeout))
		defer e.conn.SetReadDeadline(time.Time{})
	}
	var buf [EventCBSize]byte
	if _, err := io.ReadFull(e.conn, buf[:]); err != nil {
		return ev, err
	}
	_ = ev.UnmarshalBinary(buf[:])
	return ev, nil
}

// EndEvent ends a listener as libsanlock does: write the 4-byte value 1 on
// the listener, close it, then send END_EVENT on a new connection.
func (c *Client) EndEvent(e *EventConn) error {
	var one [4]byte
	binary.LittleEndian.PutUint32(one[:], 1)
	_, werr := e.conn.Write(one[:])
	e.conn.Close()
	if werr != nil {
		return &Error{Code: RvEALREADY}
	}
	q := NewRequest(CmdEndEvent, 0, 0, 0)
	q.Lockspace = lsName(e.ls)
	_, err := c.result(q)
	return err
}
