package client

import (
	"context"
	"net"
)

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

const self = 0xFFFFFFFF // Acquire acquires leases for this registered process.
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
