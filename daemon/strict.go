package daemon

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Strict peer mode (ours, off by default; docs/security.md).
//
// sanlock 3.8.5 lets every process that can open the socket act for any
// registered pid: inquire, acquire for, release, convert or set the
// killpath of another process, and release or adopt orphans. With
// Config.StrictPeer a peer that is not privileged (SO_PEERCRED uid 0, or
// the daemon's group as primary or supplementary group) may acquire,
// release, inquire and convert only for its own pid and use the LVB only of
// leases it holds; it may not set a kill program, release or adopt
// orphans, remove a lockspace or force a shutdown. Refusals answer -EPERM
// and are logged. Other commands are not affected (docs/security.md lists
// them).

// strictPolicy says what a non-privileged peer may do with a command.
type strictPolicy int

const (
	strictOpen     strictPolicy = iota // not restricted
	strictOwnPid                       // data2 must be -1 or the peer's pid
	strictOwnLease                     // the peer's pid must hold the resource
	strictPrivOnly                     // privileged peers only
)

// strictPolicyOf classifies q for strict mode.
func strictPolicyOf(q *wire.Request) strictPolicy {
	h := q.Header
	switch h.Cmd {
	case wire.CmdAcquire:
		if h.CmdFlags&(wire.AcquireOrphan|wire.AcquireOrphanOnly) != 0 {
			return strictPrivOnly // adopting a dead client's orphan
		}
		return strictOwnPid
	case wire.CmdRelease:
		if h.CmdFlags&wire.RelOrphan != 0 {
			return strictPrivOnly
		}
		return strictOwnPid
	case wire.CmdInquire, wire.CmdConvert:
		return strictOwnPid
	case wire.CmdKillpath:
		// The kill program runs with the daemon's rights: setting one
		// would let the peer run a program of its choice as them.
		return strictPrivOnly
	case wire.CmdSetLVB, wire.CmdGetLVB:
		return strictOwnLease
	case wire.CmdRemLockspace:
		return strictPrivOnly // ends every holder's leases in it
	case wire.CmdShutdown, wire.CmdShutdownWait:
		if h.Data != 0 {
			return strictPrivOnly // force: kills every holder
		}
	}
	return strictOpen
}

// peerIdentity is the SO_PEERCRED identity of a connection.
type peerIdentity struct {
	pid, uid, gid int
	groups        []int // supplementary groups (SO_PEERGROUPS)
	known         bool
}

// peerIdentityOf reads the identity the kernel recorded at connect.
func peerIdentityOf(c *Conn) peerIdentity {
	id := peerIdentity{pid: c.PeerPid(), uid: -1, gid: -1}
	rc, err := c.rawConn()
	if err != nil {
		return id
	}
	_ = rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return
		}
		id.pid, id.uid, id.gid, id.known = int(cred.Pid), int(cred.Uid), int(cred.Gid), true
		id.groups = peerGroups(int(fd))
	})
	return id
}

// peerGroups returns the peer's supplementary groups (Linux 4.13+), or
// nil when the kernel cannot tell.
func peerGroups(fd int) []int {
	n := 64
	for range 2 {
		buf := make([]uint32, n)
		l := uint32(4 * n)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e == unix.ERANGE {
			n = int(l/4) + 1
			continue
		}
		if e != 0 {
			return nil
		}
		out := make([]int, 0, l/4)
		for _, g := range buf[:l/4] {
			out = append(out, int(g))
		}
		return out
	}
	return nil
}

// privileged reports whether the peer may act for other pids: root, or a
// member of the daemon's group.
func (id peerIdentity) privileged(gid int) bool {
	if !id.known {
		return false
	}
	return id.uid == 0 || id.gid == gid || slices.Contains(id.groups, gid)
}

// strictHandler wraps h with the strict-mode check of cmd when strict mode
// is on; otherwise h is returned as it is, so the default mode runs
// exactly the 3.8.5 code paths.
func (s *Server) strictHandler(h Handler) Handler {
	if !s.cfg.StrictPeer {
		return h
	}
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		if strictPolicyOf(q) != strictOpen {
			id := peerIdentityOf(c)
			if target, ok := c.srv.strictAllowed(id, q); !ok {
				return c.strictRefuse(q, id, target)
			}
		}
		return h(ctx, c, q)
	}
}

// strictAllowed decides q from peer id for strict mode. When it refuses,
// target is the pid the command named or whose lease it touches (-1 when
// none).
func (s *Server) strictAllowed(id peerIdentity, q *wire.Request) (target int, ok bool) {
	target = -1
	pol := strictPolicyOf(q)
	if pol == strictOpen || id.privileged(s.cfg.GID) {
		return target, true
	}
	switch pol {
	case strictOwnPid:
		if q.Header.Data2 == selfPid {
			return target, true // the peer's own registration
		}
		if t := int(int32(q.Header.Data2)); !id.known || id.pid <= 0 || t != id.pid {
			return t, false
		}
		return target, true
	case strictOwnLease:
		if s.holders == nil || len(q.Resources) == 0 || !id.known {
			return target, false
		}
		r := q.Resources[0]
		holders := s.holders(r.LockspaceName, r.Name)
		if len(holders) == 0 || slices.Contains(holders, id.pid) {
			return target, true // nobody's lease (the command fails), or ours
		}
		return holders[0], false
	}
	if q.Header.Data2 != selfPid {
		switch q.Header.Cmd {
		case wire.CmdAcquire, wire.CmdRelease, wire.CmdKillpath:
			target = int(int32(q.Header.Data2)) // for the log
		}
	}
	return target, false
}

// strictRefuse logs and answers a refused command with -EPERM in the reply
// shape of its command.
func (c *Conn) strictRefuse(q *wire.Request, id peerIdentity, target int) error {
	c.srv.lg.Warn(fmt.Sprintf("cmd_%s ci %d fd %d refused by strict_peer: peer pid %d uid %d gid %d target pid %d",
		q.Header.Cmd.DebugName(), c.slot, c.fd, id.pid, id.uid, id.gid, target))
	eperm := int32(rescode.RvEPERM)
	switch q.Header.Cmd {
	case wire.CmdShutdown:
		return nil // no reply; the connection is closed
	case wire.CmdGetLVB:
		h := q.Header
		h.Version, h.Data2 = wire.ProtoVersion, 0
		h.Data, h.Length = uint32(eperm), wire.HeaderSize+q.Header.Data2
		return c.write(h.Bytes())
	case wire.CmdInquire:
		h := q.Header
		h.Version, h.Length, h.Data, h.Data2 = wire.ProtoVersion, wire.HeaderSize, uint32(eperm), 0
		return c.write(h.Bytes())
	}
	return c.Reply(q, rescode.RvEPERM)
}
