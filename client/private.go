package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/wire"
)

// gosanlock's own commands (docs/protocol.md "Private commands"): they
// travel under their own header magic, so a sanlock daemon never takes
// them for one of its commands.

// ErrNotGosanlock is Hello's answer when the daemon does not serve
// gosanlock's private commands: a sanlock (C) daemon, which ignores them,
// or a gosanlock daemon older than them, which closes the connection.
var ErrNotGosanlock = errors.New("the daemon does not answer gosanlock's private commands (sanlock, or an older gosanlock)")

// Hello reports whether the daemon serves gosanlock's private commands
// (CmdHello): nil when it answers, ErrNotGosanlock when no answer comes
// within wait or the connection is closed without one, another error
// when the daemon cannot be reached.
func (c *Client) Hello(ctx context.Context, wait time.Duration) error {
	cc := *c
	if cc.Timeout == 0 || cc.Timeout > wait {
		cc.Timeout = wait
	}
	conn, err := cc.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	p, err := privateExchange(ctx, conn, NewRequest(CmdHello, 0, 0, 0))
	if err != nil {
		return err
	}
	return p.Err()
}

// privateExchange sends the private request q on conn and reads its
// reply: ErrNotGosanlock when none comes before the connection's deadline
// or the connection is closed without one, ctx.Err() when ctx ends first.
func privateExchange(ctx context.Context, conn net.Conn, q *Request) (*Reply, error) {
	stop := interruptOnDone(ctx, conn)
	p, err := exchange(conn, q)
	if stop() && err != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, ErrBadMagic) {
			return nil, ErrNotGosanlock
		}
		return nil, err
	}
	return p, nil
}

// LastError is the last failure the daemon recorded for the calling
// process (LastError).
type LastError struct {
	// Cmd is the command that failed and Code its result (the number
	// the reply carried).
	Cmd  Cmd
	Code int
	// Cause says why in plain words ("open /dev/x: no such file or
	// directory", "lockspace LS is not joined"); "" when the daemon
	// knows no more than the code.
	Cause string
	// Age is the time since the failure.
	Age time.Duration
}

// ErrNoLastError is LastError's answer when the daemon has recorded no
// failure of the calling process (none, or none in the last 5 minutes).
var ErrNoLastError = errors.New("the daemon has recorded no failure of this process")

// LastErrorWait bounds LastError's wait for an answer: a gosanlock
// daemon answers at once, a sanlock daemon never.
const LastErrorWait = time.Second

// LastError asks the daemon why the last failed command of this process
// failed (CmdLastError, docs/protocol.md "Private commands"). The daemon
// knows a process by its pid and answers about no other process; any
// connection of the process may ask. Call it right after the failure:
// the record is replaced by the process's next failure and kept for 5
// minutes. It returns ErrNoLastError when nothing is recorded and
// ErrNotGosanlock when no answer comes within LastErrorWait (a sanlock
// daemon, or a gosanlock daemon without the command).
func (c *Client) LastError(ctx context.Context) (LastError, error) {
	cc := *c
	if cc.Timeout == 0 || cc.Timeout > LastErrorWait {
		cc.Timeout = LastErrorWait
	}
	conn, err := cc.connect(ctx)
	if err != nil {
		return LastError{}, err
	}
	defer conn.Close()
	p, err := privateExchange(ctx, conn, NewRequest(wire.CmdLastError, 0, 0, 0))
	if err != nil {
		return LastError{}, err
	}
	if p.Header.Result() == -int32(syscall.ENOENT) {
		return LastError{}, ErrNoLastError
	}
	if err := p.Err(); err != nil {
		return LastError{}, err
	}
	for _, r := range p.Records {
		if r.Type == wire.StateLastError {
			return LastError{Cmd: Cmd(r.Data32), Code: int(int32(r.Flags)), Cause: r.Text,
				Age: time.Duration(r.Data64) * time.Millisecond}, nil
		}
	}
	return LastError{}, fmt.Errorf("sanlock: %s reply without its record", wire.CmdLastError.DebugName())
}

// Reexec asks the daemon to hand over to a new image of its own binary
// (the file at the path it was started from, re-read from disk;
// docs/upgrade.md). nil means the new image serves; on failure the error
// carries the daemon's reason and the old image serves on. The request
// is a private command (docs/protocol.md "Private commands"): a sanlock
// daemon never answers it, and the call then fails when the
// connection's deadline (if any) passes.
func (c *Client) Reexec(ctx context.Context) error {
	q := NewRequest(CmdReexec, 0, 0, 0)
	p, err := c.result(ctx, q)
	if err != nil && p != nil && len(p.Records) > 0 && p.Records[0].Text != "" {
		return fmt.Errorf("%w: %s", err, p.Records[0].Text)
	}
	return err
}

// Cause is the daemon's explanation of this process's failure of cmd
// with result code (LastError), "" when it has none for that failure: no
// record, a record of another command or code, a daemon without the
// private command, or a daemon that cannot be reached.
func (c *Client) Cause(ctx context.Context, cmd Cmd, code int) string {
	le, err := c.LastError(ctx)
	if err != nil || le.Cmd != cmd || le.Code != code {
		return ""
	}
	return le.Cause
}
