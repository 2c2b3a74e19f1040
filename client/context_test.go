package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/wire"
)

// ctxDaemon listens on a socket in a temp dir and hands each accepted
// connection to serve.
func ctxDaemon(t *testing.T, serve func(net.Conn)) *Client {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SockName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	c, err := Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func reply(t *testing.T, conn net.Conn, q *Request, result int32) {
	h := wire.ResultReply(q.Header, result)
	if _, err := conn.Write(h.Bytes()); err != nil {
		t.Errorf("reply: %v", err)
	}
}

// TestClientContext: a call whose context ends while the daemon has
// not answered returns the context's error at once.
func TestClientContext(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	c := ctxDaemon(t, func(conn net.Conn) {
		if _, err := wire.ReadRequest(conn, 0); err != nil {
			return
		}
		<-hold // never answer
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.AddLockspace(ctx, &Lockspace{Name: "LS", HostID: 1}, 0, 1) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("AddLockspace with a cancelled context = %v, want context.Canceled", err)
	}
	// An already ended context stops the call before dialing.
	if _, _, err := c.Version(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Version with an ended context = %v", err)
	}
}

// TestRegAbandonedAcquire: an Acquire abandoned by its context whose reply
// is a success is released again, and the registered connection stays in
// step (the next call gets its own reply).
func TestRegAbandonedAcquire(t *testing.T) {
	answer := make(chan struct{})
	released := make(chan string, 1)
	c := ctxDaemon(t, func(conn net.Conn) {
		for {
			q, err := wire.ReadRequest(conn, 0)
			if err != nil {
				return
			}
			switch q.Header.Cmd {
			case CmdRegister:
			case CmdAcquire:
				<-answer
				reply(t, conn, q, 0)
			case CmdRelease:
				released <- q.Resources[0].Name
				reply(t, conn, q, 0)
			case CmdRestrict:
				reply(t, conn, q, 7)
			}
		}
	})
	reg, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res := []Resource{{LockspaceName: "LS", Name: "R1", Disks: []Disk{{Path: "/x"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := reg.Acquire(ctx, res, AcquireNoWait, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
	}
	close(answer) // the daemon grants it after all
	select {
	case name := <-released:
		if name != "R1" {
			t.Fatalf("released %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("late grant was not released")
	}
	// The connection is in step: Restrict gets its own result (7).
	p, err := reg.do(context.Background(), NewRequest(CmdRestrict, 0, 0, self))
	if err != nil || p.Result() != 7 {
		t.Fatalf("next call on the registered connection: %+v %v", p, err)
	}
}

// TestSentinels: a reply's *Error matches the sentinel of its code (and
// only that one), and errno codes still match syscall.Errno.
func TestSentinels(t *testing.T) {
	err := error(&Error{Code: SanlkAcquireIDLive})
	if !errors.Is(err, ErrAcquireIDLive) || errors.Is(err, ErrAcquireOwnedRetry) {
		t.Errorf("IDLIVE sentinel matching wrong")
	}
	wrapped := fmt.Errorf("acquire: %w", &Error{Code: RvENOSPC})
	if !errors.Is(wrapped, ErrNoLockspace) || !errors.Is(wrapped, syscall.ENOSPC) {
		t.Errorf("wrapped ENOSPC does not match its sentinel and errno")
	}
	var e *Error
	if !errors.As(wrapped, &e) || e.Code != RvENOSPC {
		t.Errorf("errors.As: %v", e)
	}
	if AcquireNoWait != AcquireFlags(AcquireOwnerNowait) || ForceGraceful != ForceMode(ReqGraceful) {
		t.Error("typed flags differ from the wire values")
	}
}
