// Package strictpeer is the strict peer mode of the daemon (ours, off by
// default; docs/security.md) as pure decisions: from the peer's
// SO_PEERCRED identity, the daemon's group and the request, whether the
// command may run. The daemon keeps the call sites (the handler wrapper,
// the log line and the -EPERM reply).
//
// sanlock 3.8.5 lets every process that can open the socket act for any
// registered pid: inquire, acquire for, release, convert or set the
// killpath of another process, and release or adopt orphans. In strict
// mode a peer that is not privileged (SO_PEERCRED uid 0, or the daemon's
// group as primary or supplementary group) may acquire, release, inquire
// and convert only for its own pid and use the LVB only of leases it
// holds; it may not set a kill program, release or adopt orphans, remove a
// lockspace or force a shutdown. Other commands are not affected
// (docs/security.md lists them).
package strictpeer

import (
	"fmt"
	"slices"

	"github.com/gosanlock/gosanlock/wire"
)

// Policy says what a non-privileged peer may do with a command.
type Policy int

const (
	Open     Policy = iota // not restricted
	OwnPid                 // data2 must be -1 or the peer's pid
	OwnLease               // the peer's pid must hold the resource
	PrivOnly               // privileged peers only
)

// selfPid is header.data2 = -1: the client registered on the connection.
const selfPid = 0xffffffff

// PolicyOf classifies q for strict mode.
func PolicyOf(q *wire.Request) Policy {
	h := q.Header
	switch h.Cmd {
	case wire.CmdAcquire, wire.CmdAcquire2, wire.CmdRelease, wire.CmdInquire, wire.CmdConvert:
		if h.CmdFlags&wire.ForClientID != 0 {
			return PrivOnly // data2 is a client index: acting for any client
		}
	}
	switch h.Cmd {
	case wire.CmdAcquire, wire.CmdAcquire2:
		if h.CmdFlags&(wire.AcquireOrphan|wire.AcquireOrphanOnly) != 0 {
			return PrivOnly // adopting a dead client's orphan
		}
		return OwnPid
	case wire.CmdRelease:
		if h.CmdFlags&wire.RelOrphan != 0 {
			return PrivOnly
		}
		return OwnPid
	case wire.CmdInquire, wire.CmdConvert:
		return OwnPid
	case wire.CmdKillpath:
		// The kill program runs with the daemon's rights: setting one
		// would let the peer run a program of its choice as them.
		return PrivOnly
	case wire.CmdSetLVB, wire.CmdGetLVB:
		return OwnLease
	case wire.CmdRemLockspace:
		return PrivOnly // ends every holder's leases in it
	case wire.CmdSetHost:
		return PrivOnly // DEAD_EXT: the host's leases are taken at once
	case wire.CmdShutdown, wire.CmdShutdownWait:
		if h.Data != 0 {
			return PrivOnly // force: kills every holder
		}
	}
	return Open
}

// Identity is the SO_PEERCRED identity of a connection.
type Identity struct {
	Pid, UID, GID int
	Groups        []int // supplementary groups (SO_PEERGROUPS)
	Known         bool  // false: the kernel did not tell (not a Unix socket)
}

// Privileged reports whether the peer may act for other pids: root, or a
// member of the daemon's group gid.
func (id Identity) Privileged(gid int) bool {
	if !id.Known {
		return false
	}
	return id.UID == 0 || id.GID == gid || slices.Contains(id.Groups, gid)
}

// Refusal is the error of a refused command. Target is the pid the command
// named or whose lease it touches (-1 when none), for the log.
type Refusal struct{ Target int }

func (r *Refusal) Error() string {
	return fmt.Sprintf("refused by strict_peer (target pid %d)", r.Target)
}

// Holders lists the pids holding resource name of lockspace space.
type Holders func(space, name string) []int

// Check decides q from peer id when the daemon's group is gid: nil when it
// may run, else a *Refusal. holders may be nil (no lease manager: the LVB
// commands are refused).
func Check(id Identity, gid int, holders Holders, q *wire.Request) error {
	pol := PolicyOf(q)
	if pol == Open || id.Privileged(gid) {
		return nil
	}
	switch pol {
	case OwnPid:
		if q.Header.Data2 == selfPid {
			return nil // the peer's own registration
		}
		if t := int(int32(q.Header.Data2)); !id.Known || id.Pid <= 0 || t != id.Pid {
			return &Refusal{Target: t}
		}
		return nil
	case OwnLease:
		if holders == nil || len(q.Resources) == 0 || !id.Known {
			return &Refusal{Target: -1}
		}
		r := q.Resources[0]
		hs := holders(r.LockspaceName, r.Name)
		if len(hs) == 0 || slices.Contains(hs, id.Pid) {
			return nil // nobody's lease (the command fails), or ours
		}
		return &Refusal{Target: hs[0]}
	}
	target := -1
	if q.Header.Data2 != selfPid {
		switch q.Header.Cmd {
		case wire.CmdAcquire, wire.CmdAcquire2, wire.CmdRelease, wire.CmdKillpath:
			target = int(int32(q.Header.Data2)) // for the log
		}
	}
	return &Refusal{Target: target}
}
