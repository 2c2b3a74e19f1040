package client

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// EventConn is an event listener connection (REG_EVENT, docs/protocol.md "Events").
type EventConn struct {
	conn *net.UnixConn
	ls   string
}

// RegEvent registers an event listener for lockspace ls.
func (c *Client) RegEvent(ctx context.Context, ls string) (*EventConn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	q := NewRequest(CmdRegEvent, 0, 0, 0)
	q.Lockspace = lsName(ls)
	q.HostEvent = &HostEvent{}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, errors.New("client: an event listener needs a Unix socket connection")
	}
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
	return &EventConn{conn: uc, ls: ls}, nil
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

// WaitEvent blocks until an event arrives or ctx ends (it then returns
// ctx.Err()).
func (e *EventConn) WaitEvent(ctx context.Context) (EventCB, error) {
	var ev EventCB
	stop := interruptOnDone(ctx, e.conn)
	var buf [EventCBSize]byte
	_, err := io.ReadFull(e.conn, buf[:])
	if stop() {
		_ = e.conn.SetDeadline(time.Time{})
		if err != nil {
			return ev, ctx.Err()
		}
	}
	if err != nil {
		return ev, err
	}
	_ = ev.UnmarshalBinary(buf[:])
	return ev, nil
}

// EndEvent ends a listener as libsanlock does: write the 4-byte value 1 on
// the listener, close it, then send END_EVENT on a new connection.
func (c *Client) EndEvent(ctx context.Context, e *EventConn) error {
	var one [4]byte
	binary.LittleEndian.PutUint32(one[:], 1)
	_, werr := e.conn.Write(one[:])
	e.conn.Close()
	if werr != nil {
		return &Error{Code: RvEALREADY}
	}
	q := NewRequest(CmdEndEvent, 0, 0, 0)
	q.Lockspace = lsName(e.ls)
	_, err := c.result(ctx, q)
	return err
}
