package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
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
	stop := interruptOnDone(ctx, conn)
	p, err := exchange(conn, NewRequest(CmdHello, 0, 0, 0))
	if stop() && err != nil {
		return ctx.Err()
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, ErrBadMagic) {
			return ErrNotGosanlock
		}
		return err
	}
	return p.Err()
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
