package client

import (
	"context"
	"net"
)

// acquireReq builds ACQUIRE for data2 (pid, or -1 for self).
func acquireReq(data2 uint32, res []Resource, flags AcquireFlags, opt *Options) *Request {
	q := NewRequest(CmdAcquire, uint32(flags), uint32(len(res)), data2)
	q.Resources = res
	q.Options = opt
	return q
}

func releaseReq(data2 uint32, res []Resource, flags ReleaseFlags) *Request {
	q := NewRequest(CmdRelease, uint32(flags), uint32(len(res)), data2)
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

// Inquiry is the answer to INQUIRE: the leases a client holds, as the
// daemon's state string and count.
type Inquiry struct {
	// State is the state string as the daemon sent it (FormatState's form).
	State string
	// Count is the number of leases the daemon reported. It is also set
	// when the daemon fails to format the state string (docs/protocol.md
	// "Commands").
	Count int
}

// Resources parses the state string: the held leases, LVer set for
// exclusive ones and ResShared in Flags for shared ones.
func (i Inquiry) Resources() ([]Resource, error) { return ParseState(i.State) }

// inquiryOf converts an INQUIRE reply. For the formatting errors the
// count is still reported with the error.
func inquiryOf(p *Reply, err error) (Inquiry, error) {
	if p == nil {
		return Inquiry{}, err
	}
	if err == nil {
		err = p.Err()
	}
	return Inquiry{State: string(p.Data), Count: int(p.Header.Data2)}, err
}

// Acquire acquires leases for the registered process pid (on a new
// connection, data2 = pid).
func (c *Client) Acquire(ctx context.Context, pid int, res []Resource, flags AcquireFlags, opt *Options) error {
	_, err := c.result(ctx, acquireReq(pidData(pid), res, flags, opt))
	return err
}

// Release releases leases of process pid. With RelOrphan the result is the
// number of orphans released.
func (c *Client) Release(ctx context.Context, pid int, res []Resource, flags ReleaseFlags) (int, error) {
	p, err := c.result(ctx, releaseReq(pidData(pid), res, flags))
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// Inquire returns the leases held by pid.
func (c *Client) Inquire(ctx context.Context, pid int) (Inquiry, error) {
	return inquiryOf(c.Do(ctx, NewRequest(CmdInquire, 0, 0, pidData(pid))))
}

// Convert changes the mode of a lease held by pid (ResShared in res.Flags
// selects shared).
func (c *Client) Convert(ctx context.Context, pid int, res *Resource, flags uint32) error {
	_, err := c.result(ctx, convertReq(pidData(pid), res, flags))
	return err
}

// Reg is a registered connection (sanlock_register): the lease-holding
// handle of this process. Leases acquired through it are released by the
// daemon when it is closed. Calls are serialised.
//
// A registered connection carries one exchange at a time and cannot be
// interrupted without losing every lease on it, so the context of a call
// works like this: waiting for an earlier call to finish stops when ctx
// ends; once the request is sent, an ended ctx makes the call return
// ctx.Err() at once while the reply is still read in the background (and
// the next call waits for it). An Acquire abandoned that way whose reply
// turns out to be a success is released again, so an abandoned Acquire
// never leaves a lease the caller does not know about.
type Reg struct {
	st *regState
}

// regState is the registered connection. sem (capacity 1) serialises
// exchanges; unlike a mutex, waiting for it can be abandoned when a
// context ends.
type regState struct {
	sem  chan struct{}
	conn net.Conn
}

// Register connects and sends REGISTER (no reply is read, docs/protocol.md
// "Registration"). The daemon records this process (SO_PEERCRED) as the
// owner of the connection.
func (c *Client) Register(ctx context.Context) (*Reg, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	q := NewRequest(CmdRegister, 0, 0, 0)
	if _, err := exchange(conn, q); err != nil {
		conn.Close()
		return nil, err
	}
	return &Reg{st: &regState{conn: conn, sem: make(chan struct{}, 1)}}, nil
}

// Conn returns the underlying connection (e.g. to pass the fd to a child
// with File()); nil when it is not a Unix socket (Client.Dialer).
func (g *Reg) Conn() *net.UnixConn {
	uc, _ := g.st.conn.(*net.UnixConn)
	return uc
}

// Close closes the registered connection; the daemon then releases the
// leases (persistent ones become orphans).
func (g *Reg) Close() error { return g.st.conn.Close() }

func (g *Reg) do(ctx context.Context, q *Request) (*Reply, error) { return g.doLate(ctx, q, nil) }

func (g *Reg) result(ctx context.Context, q *Request) (*Reply, error) {
	p, err := g.do(ctx, q)
	if err != nil {
		return p, err
	}
	return p, p.Err()
}

// self as data2 targets the process registered on the connection.
const self = 0xFFFFFFFF

// Acquire acquires leases for this registered process.
func (g *Reg) Acquire(ctx context.Context, res []Resource, flags AcquireFlags, opt *Options) error {
	p, err := g.doLate(ctx, acquireReq(self, res, flags, opt), g.releaseLate(res))
	if err != nil {
		return err
	}
	return p.Err()
}

// Release releases leases of this process (see Client.Release).
func (g *Reg) Release(ctx context.Context, res []Resource, flags ReleaseFlags) (int, error) {
	p, err := g.result(ctx, releaseReq(self, res, flags))
	if p == nil || err != nil {
		return 0, err
	}
	return int(p.Result()), nil
}

// Inquire returns the leases this process holds.
func (g *Reg) Inquire(ctx context.Context) (Inquiry, error) {
	return inquiryOf(g.do(ctx, NewRequest(CmdInquire, 0, 0, self)))
}

// Convert changes the mode of a held lease.
func (g *Reg) Convert(ctx context.Context, res *Resource, flags uint32) error {
	_, err := g.result(ctx, convertReq(self, res, flags))
	return err
}

// Killpath sets the program the daemon runs instead of SIGTERM (flags may be
// KillpathPID). Only the registered connection itself can set it.
func (g *Reg) Killpath(ctx context.Context, path, args string, flags uint32) error {
	q := NewRequest(CmdKillpath, flags, 0, self)
	q.Killpath = &Killpath{Path: path, Args: args}
	_, err := g.result(ctx, q)
	return err
}

// Restrict sets restrict flags on this connection. After RestrictAll the
// daemon ignores everything sent on it, so no reply would be read for later
// commands.
func (g *Reg) Restrict(ctx context.Context, flags uint32) error {
	_, err := g.result(ctx, NewRequest(CmdRestrict, flags, 0, self))
	return err
}
