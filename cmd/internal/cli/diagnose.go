package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// watchDial makes c's client record why a connection to the daemon could
// not be made (c.dialErr), so that a failed action can tell "no daemon"
// apart from a daemon's answer. The connections are the ones the client
// would make itself.
func (c *clientRun) watchDial() {
	if c.cl == nil {
		return
	}
	inner, path := c.cl.Dialer, c.cl.SockPath
	c.cl.Dialer = func(ctx context.Context) (net.Conn, error) {
		var nc net.Conn
		var err error
		if inner != nil {
			nc, err = inner(ctx)
		} else {
			nc, err = dialSocket(ctx, path)
		}
		if err != nil {
			c.mu.Lock()
			c.dialErr = err
			c.mu.Unlock()
		}
		return nc, err
	}
}

// dialSocket connects to the daemon socket at path as the client package
// does: a full listen backlog (EAGAIN) is waited out, and a failure is
// the -errno result libsanlock would give.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return nc, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var en syscall.Errno
		if !errors.As(err, &en) {
			return nil, err
		}
		if en != syscall.EAGAIN {
			return nil, &client.Error{Code: -int(en)}
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// noDaemonLine is the stderr line for a daemon that could not be reached,
// or "" when every connection was made.
func (c *clientRun) noDaemonLine() string {
	if c.err != nil {
		return fmt.Sprintf("sanlock: cannot reach the daemon: %v", c.err)
	}
	c.mu.Lock()
	dialErr := c.dialErr
	c.mu.Unlock()
	if dialErr == nil {
		return ""
	}
	path := c.cl.SockPath
	switch client.ErrorCode(dialErr) {
	case client.RvENOENT, client.RvECONNREFUSED:
		return fmt.Sprintf("sanlock: no daemon at %s (is sanlock running?)", path)
	}
	return fmt.Sprintf("sanlock: cannot connect to the daemon at %s: %s", path, errText(dialErr))
}

// diagnose prints, after a failed action, the one stderr line that says
// why: the daemon could not be reached, or the last negative result with
// its explanation. Nothing is printed for a success or when the action
// has said it already.
func (c *clientRun) diagnose(action string) {
	if c.reported {
		return
	}
	switch l := c.noDaemonLine(); {
	case l != "":
		fmt.Fprintln(c.stderr, l)
	case c.lastRv < 0:
		c.askCause(c.lastRv)
		fmt.Fprintln(c.stderr, failLine(action, c.lastRv, c.cause))
	default:
		return
	}
	c.reported = true
}

// causeWait bounds the question for the daemon's cause of a failure: a
// gosanlock daemon answers at once; a sanlock daemon never answers, and
// the tool then gives the code's generic explanation.
const causeWait = 300 * time.Millisecond

// askCause fills c.cause, when the tool knows none itself, with the cause
// the daemon recorded for this process's last failure (client.LastError,
// docs/protocol.md "Private commands"), if that failure had result code.
func (c *clientRun) askCause(code int) {
	if c.cause != "" || code >= 0 || c.cl == nil || c.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), causeWait)
	defer cancel()
	le, err := c.cl.LastError(ctx)
	if err == nil && le.Code == code && le.Age < time.Minute {
		c.cause = le.Cause
	}
}
