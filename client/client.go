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
// Every call takes a context first, which bounds it: dialing, sending and
// waiting for the reply ([Client.Do]; on a registered connection, see
// [Reg]). Flags that have a type of their own are passed typed
// ([AcquireFlags], [ReleaseFlags], [AddFlags], [RemFlags], [ForceMode]),
// and results are typed ([Inquiry], [HeldBy], records and structures).
// Only what never waits takes no context: [EventConn.GetEvent] and the
// accessors (Conn, Close).
//
// Programs that hold leases should normally use the lease package, which
// builds sessions, blocking acquire, fencing tokens and loss notices on top
// of this one.
package client

import (
	"context"
	"errors"
	"fmt"
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
	// Dialer, when set, makes the connections instead of dialing SockPath
	// (tests: a daemon served over in-memory connections). A connection
	// that is not a Unix socket cannot be handed to another process
	// (Reg.Conn returns nil) nor be an event listener.
	Dialer func(ctx context.Context) (net.Conn, error)
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

// busyRetry is the pause between two dials that found the daemon's listen
// backlog full.
const busyRetry = time.Millisecond

// dial connects to the daemon as libsanlock does. libsanlock's blocking
// connect waits in the kernel while the daemon's listen backlog is full; a
// Go dial is non-blocking and fails with EAGAIN instead, so a dial that
// gets EAGAIN is tried again (until ctx ends, or for Timeout when set).
// It is the one dial of the package: calls, Register and RegEvent.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.Dialer != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return c.Dialer(ctx)
	}
	var deadline time.Time
	if c.Timeout > 0 {
		deadline = time.Now().Add(c.Timeout)
	}
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "unix", c.SockPath)
		if err == nil {
			return nc, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, syscall.EAGAIN) || (!deadline.IsZero() && time.Now().After(deadline)) {
			return nil, connErr(err)
		}
		t := time.NewTimer(busyRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// connect dials for one call; Timeout, when set, bounds the call's I/O.
func (c *Client) connect(ctx context.Context) (net.Conn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
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
// reply. Dialing, sending and waiting for the reply stop when ctx ends,
// and Do then returns ctx.Err(); the daemon may still carry out a command
// whose reply was abandoned (an ADD_LOCKSPACE keeps joining, for
// example), and the caller decides what to undo.
func (c *Client) Do(ctx context.Context, q *Request) (*Reply, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := interruptOnDone(ctx, conn)
	p, err := exchange(conn, q)
	if stop() && err != nil {
		// The context ended the exchange: report that, not the I/O error.
		return p, ctx.Err()
	}
	return p, err
}

// result runs q and converts a negative result into *Error.
func (c *Client) result(ctx context.Context, q *Request) (*Reply, error) {
	p, err := c.Do(ctx, q)
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

// ---- lease commands that target a registered process ----

// data2 = -1: the client registered on this connection
