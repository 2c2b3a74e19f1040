package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// WithContext returns a copy of c whose calls are bounded by ctx: dialing,
// sending the request and waiting for the reply all stop when ctx ends, and
// the call then returns ctx.Err(). The daemon may still carry out a command
// whose reply was abandoned (an ADD_LOCKSPACE keeps joining, for example);
// the caller decides what to undo.
//
// Every method of Client honours the context this way, so
//
//	err := cl.WithContext(ctx).AddLockspace(ls, 0, 1)
//
// is the context-aware form of AddLockspace. c itself is not changed.
func (c *Client) WithContext(ctx context.Context) *Client {
	if ctx == nil {
		panic("client: nil context")
	}
	c2 := *c
	c2.ctx = ctx
	return &c2
}

func (c *Client) context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// interruptOnDone makes I/O on conn fail at once when ctx ends. The returned
// stop function disarms it and reports whether the context fired.
func interruptOnDone(ctx context.Context, conn net.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	var fired atomic.Bool
	unreg := context.AfterFunc(ctx, func() {
		fired.Store(true)
		_ = conn.SetDeadline(time.Unix(1, 0))
	})
	return func() bool {
		unreg()
		return fired.Load()
	}
}

// WithContext returns a Reg for the same registered connection whose calls
// are bounded by ctx.
//
// A registered connection carries one exchange at a time and cannot be
// interrupted without losing every lease on it, so ctx works like this:
// waiting for an earlier call to finish stops when ctx ends; once the
// request is sent, an ended ctx makes the call return ctx.Err() at once
// while the reply is still read in the background (and the next call waits
// for it). An Acquire abandoned that way whose reply turns out to be a
// success is released again, so an abandoned Acquire never leaves a lease
// the caller does not know about.
func (g *Reg) WithContext(ctx context.Context) *Reg {
	if ctx == nil {
		panic("client: nil context")
	}
	return &Reg{st: g.st, ctx: ctx}
}

func (g *Reg) context() context.Context {
	if g.ctx == nil {
		return context.Background()
	}
	return g.ctx
}

// doLate runs one exchange on the registered connection. late, when not
// nil, is called (still holding the connection) with the reply of an
// exchange the caller abandoned because its context ended.
func (g *Reg) doLate(q *Request, late func(*Reply)) (*Reply, error) {
	ctx := g.context()
	select {
	case g.st.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ctx.Done() == nil {
		defer func() { <-g.st.sem }()
		return exchange(g.st.conn, q)
	}
	if err := ctx.Err(); err != nil {
		<-g.st.sem
		return nil, err
	}
	var (
		mu        sync.Mutex
		abandoned bool
		p         *Reply
		err       error
		done      = make(chan struct{})
	)
	go func() {
		rp, rerr := exchange(g.st.conn, q)
		mu.Lock()
		if abandoned {
			if late != nil && rerr == nil && rp != nil {
				late(rp)
			}
		} else {
			p, err = rp, rerr
		}
		mu.Unlock()
		<-g.st.sem
		close(done)
	}()
	select {
	case <-done:
		return p, err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		if p != nil || err != nil {
			// The reply arrived just now: it wins.
			return p, err
		}
		abandoned = true
		return nil, ctx.Err()
	}
}

// releaseLate returns the late-reply hook of an abandoned Acquire: when the
// acquire succeeded after all, release what it got (the semaphore is still
// held, so the exchange is done directly on the connection).
func (g *Reg) releaseLate(res []Resource) func(*Reply) {
	return func(p *Reply) {
		if p.Result() < 0 {
			return
		}
		names := make([]Resource, len(res))
		for i, r := range res {
			names[i] = Resource{LockspaceName: r.LockspaceName, Name: r.Name, Disks: r.Disks, NumDisks: r.NumDisks}
		}
		_, _ = exchange(g.st.conn, releaseReq(self, names, 0))
	}
}
