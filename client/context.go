package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

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

// doLate runs one exchange on the registered connection. late, when not
// nil, is called (still holding the connection) with the reply of an
// exchange the caller abandoned because its context ended.
func (g *Reg) doLate(ctx context.Context, q *Request, late func(*Reply)) (*Reply, error) {
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
