package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// registerResourceCmds installs the resource commands (docs/protocol.md
// "Commands" #7–#11, #14, #17, #25–#27): each handler decodes the request,
// calls the lease manager and turns its error into the wire result.
func (s *Server) registerResourceCmds(m *manager.Resources) {
	s.Handle(wire.CmdAcquire, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		return regCmd(func(ctx context.Context, t manager.ClientID, q *wire.Request) error {
			req := manager.AcquireRequest{Resources: q.Resources, Flags: q.Header.CmdFlags, Guard: c.writeGuard()}
			if q.Options != nil {
				req.OwnerName = q.Options.OwnerName
			}
			defer s.leaseWork()
			return m.Acquire(ctx, t, req)
		}, true)(ctx, c, q)
	})
	s.Handle(wire.CmdAcquire2, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		return s.cmdAcquire2(ctx, m, c, q)
	})
	s.Handle(wire.CmdRelease, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		t, code := target(c, q, false)
		if code != 0 {
			return c.Reply(q, code)
		}
		defer s.leaseWork()
		n, err := m.Release(ctx, t, manager.ReleaseRequest{Resources: q.Resources, Flags: q.Header.CmdFlags})
		if err != nil {
			// "lver changed" and "owner changed" as 5.x numbers them
			// (docs/compat.md "Result codes").
			return c.Reply(q, int32(rescode.Release5(rescode.Code(c.result(err)))))
		}
		return c.Reply(q, int32(n))
	})
	s.Handle(wire.CmdInquire, ClassWork, func(_ context.Context, c *Conn, q *wire.Request) error {
		return cmdInquire(m, c, q)
	})
	s.Handle(wire.CmdConvert, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		return regCmd(func(ctx context.Context, t manager.ClientID, q *wire.Request) error {
			req := manager.ConvertRequest{Flags: q.Header.CmdFlags, Guard: c.writeGuard()}
			if len(q.Resources) > 0 {
				req.Resource = &q.Resources[0]
			}
			return m.Convert(ctx, t, req)
		}, false)(ctx, c, q)
	})
	s.Handle(wire.CmdKillpath, ClassWork, regCmd(func(_ context.Context, t manager.ClientID, q *wire.Request) error {
		var kp wire.Killpath
		if q.Killpath != nil {
			kp = *q.Killpath
		}
		return m.SetKillpath(t, kp.Path, kp.Args, q.Header.CmdFlags)
	}, false))
	s.Handle(wire.CmdRequest, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		if len(q.Resources) == 0 {
			return c.Reply(q, rescode.RvEINVAL)
		}
		err := m.Request(ctx, manager.RequestRequest{Resource: q.Resources[0], Force: q.Header.Data,
			NextLVer: q.Header.CmdFlags&wire.RequestNextLVer != 0})
		return c.Reply(q, c.result(err))
	})
	s.Handle(wire.CmdExamineResource, ClassWork, func(_ context.Context, c *Conn, q *wire.Request) error {
		if len(q.Resources) > 0 {
			m.ExamineResource(q.Resources[0].LockspaceName, q.Resources[0].Name)
		}
		return c.Reply(q, 0)
	})
	s.Handle(wire.CmdSetLVB, ClassWork, func(_ context.Context, c *Conn, q *wire.Request) error {
		space, name := resName(q)
		return c.Reply(q, c.result(m.SetLVB(space, name, q.LVB)))
	})
	s.Handle(wire.CmdGetLVB, ClassWork, func(_ context.Context, c *Conn, q *wire.Request) error {
		return cmdGetLVB(m, c, q)
	})
}

// cmdAcquire2 is ACQUIRE2 (docs/protocol.md "Commands of 3.9.5 and
// 5.1.1"): ACQUIRE; when a lease is held by another host the reply
// carries the owner's host record and name, and echoes data2.
func (s *Server) cmdAcquire2(ctx context.Context, m *manager.Resources, c *Conn, q *wire.Request) error {
	t, code := target(c, q, true)
	if code != 0 {
		return c.Reply(q, code)
	}
	req := manager.AcquireRequest{Resources: q.Resources, Flags: q.Header.CmdFlags}
	if q.Options != nil {
		req.OwnerName = q.Options.OwnerName
	}
	err := m.Acquire2(ctx, t, req)
	s.leaseWork()
	var he *manager.HeldError
	if !errors.As(err, &he) {
		return c.Reply(q, c.result(err))
	}
	c.noteCause(causeText(he))
	owner := he.Owner
	return c.send(&wire.Reply{Header: replyHeader(q, int32(he.Code), q.Header.Data2), Host: &owner, OwnerName: he.OwnerName})
}

// resName is the lockspace and resource name of a request's first
// resource ("" when it has none).
func resName(q *wire.Request) (space, name string) {
	if len(q.Resources) == 0 {
		return "", ""
	}
	return q.Resources[0].LockspaceName, q.Resources[0].Name
}

// selfPid is header.data2 = -1: the client registered on this connection.
const selfPid = 0xffffffff

// target resolves the registered client a W-reg command acts on (docs/protocol.md
// "Dispatch classes", "Commands"); the manager then marks it busy.
func target(c *Conn, q *wire.Request, acquire bool) (manager.ClientID, int32) {
	t, code := targetConn(c, q)
	if code != 0 {
		return 0, code
	}
	st, _ := c.srv.reg.Status(t)
	switch {
	case st.PidDead:
		c.noteCause(fmt.Sprintf("process %d has ended", st.Pid))
		return 0, rescode.RvESTALE
	case acquire && st.KillCount > 0:
		c.noteCause(fmt.Sprintf("process %d is being killed", st.Pid))
		return 0, rescode.RvEBUSY
	}
	return t, 0
}

// targetConn is the registered client header.data2 names: this
// connection's (selfPid; -EBUSY when it is not registered), the one of
// that pid (-ESRCH when none) or, with FOR_CLIENT_ID in cmd_flags, the
// client of that index (ci= in STATUS; -EBUSY when no registered client
// has it, as 3.9.5 and 5.1.1 answer).
func targetConn(c *Conn, q *wire.Request) (manager.ClientID, int32) {
	if q.Header.CmdFlags&wire.ForClientID != 0 {
		if o := c.srv.clientAt(int(int32(q.Header.Data2))); o != nil && o.clientStatus().Registered {
			return o.id, 0
		}
		c.noteCause(fmt.Sprintf("no registered process at client index %d", int32(q.Header.Data2)))
		return 0, rescode.RvEBUSY
	}
	if q.Header.Data2 == selfPid {
		if !c.clientStatus().Registered {
			c.noteCause("the asking process has not registered on this connection")
			return 0, rescode.RvEBUSY
		}
		return c.id, 0
	}
	if t, ok := c.srv.reg.ByPid(int(int32(q.Header.Data2))); ok {
		return t, 0
	}
	c.noteCause(fmt.Sprintf("no registered process with pid %d", int32(q.Header.Data2)))
	return 0, rescode.RvESRCH
}

// leaseWork counts an acquire or a release and calls Tuning.Settled after
// every leaseBurst of them.
func (s *Server) leaseWork() {
	if s.deps.Tuning != nil && s.leaseOps.Add(1)%leaseBurst == 0 {
		s.deps.Tuning.Settled()
	}
}

// regCmd is a W-reg command whose reply is a result: resolve the target
// client, run fn, reply with its result.
func regCmd(fn func(context.Context, manager.ClientID, *wire.Request) error, acquire bool) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		t, code := target(c, q, acquire)
		if code == 0 {
			code = c.result(fn(ctx, t, q))
		}
		return c.Reply(q, code)
	}
}

// cmdInquire is INQUIRE (docs/protocol.md "Commands" #9, docs/paxos.md "inquire").
func cmdInquire(m *manager.Resources, c *Conn, q *wire.Request) error {
	t, code := target(c, q, false)
	var list []wire.Resource
	if code == 0 {
		var err error
		list, err = m.Inquire(t)
		code = c.result(err)
	}
	if code != 0 || len(list) == 0 {
		return c.send(&wire.Reply{Header: replyHeader(q, code, 0)})
	}
	// The state string and its NUL; a formatting error sends the NUL alone.
	rp := wire.Reply{Header: replyHeader(q, 0, uint32(len(list)))}
	state, err := wire.FormatState(list)
	rp.Data = []byte(state)
	if err != nil {
		rp.Header.Data, rp.Data = uint32(rescode.ErrorCode(err)), []byte{}
	}
	return c.send(&rp)
}

// cmdGetLVB is GET_LVB (docs/paxos.md "LVB", docs/protocol.md "Commands" #26): the in-memory LVB,
// at most one sector.
func cmdGetLVB(m *manager.Resources, c *Conn, q *wire.Request) error {
	space, name := resName(q)
	b, err := m.GetLVB(space, name, int(q.Header.Data2))
	if err != nil {
		return c.send(lvbError(q, c.result(err)))
	}
	return c.send(&wire.Reply{Header: replyHeader(q, 0, 0), Data: b})
}

// lvbError is GET_LVB's error reply: the length announces the requested
// size, but nothing follows.
func lvbError(q *wire.Request, rv int32) *wire.Reply {
	h := replyHeader(q, rv, 0)
	h.Length = wire.HeaderSize + q.Header.Data2
	return &wire.Reply{Header: h}
}
