package manager

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/gosanlock/gosanlock/wire"
)

// ClientRegistry is the registry of the daemon's clients, keyed by ClientID: what
// REGISTER, RESTRICT and KILLPATH set, the record name, and the kill
// escalation's marks on each (docs/protocol.md "Registration", "Kill
// program"; docs/delta.md "Signalling holders"). The daemon adds every
// connection when it accepts it and removes it when its slot is freed;
// the manager finds a lease holder's client by pid, reads its restrict
// flags and kill program, and notes the signals sent to it. Its mutex is a
// leaf: it may be taken under Resources.mu or Lockspaces.mu, never the
// other way round. Unknown IDs are ignored (a client that went away).
type ClientRegistry struct {
	mu sync.Mutex
	m  map[ClientID]*ClientStatus
}

// ClientStatus is the state of one client in the registry: all of its
// CLIENT status record but the connection's slot, descriptor and commands.
type ClientStatus struct {
	// Order ranks the clients of one pid: ByPid returns the lowest (the
	// daemon uses the connection slot, the order its table is searched).
	Order      int
	Pid        int // the registered pid; -1 before REGISTER
	Registered bool
	Name       string // the record name
	Restrict   uint32 // RESTRICT flags (wire.Restrict*)
	// Flags holds wire.KillpathPID (set by KILLPATH) and FlagRanKillpath.
	Flags     uint32
	KillPath  string // KILLPATH program
	KillArgs  string // ... and its arguments
	PidDead   bool   // its connection ended
	KillCount int    // signals and kill programs sent by the escalation
	KillLast  uint64 // when the last one was sent (seconds, the manager's clock)
}

// FlagRanKillpath is the client flag set once the escalation ran the
// client's kill program (shown in the record's flags=).
const FlagRanKillpath = 0x2

// NewClientRegistry returns an empty registry.
func NewClientRegistry() *ClientRegistry { return &ClientRegistry{m: make(map[ClientID]*ClientStatus)} }

// Add enters client id with state st (a new connection: Pid -1; an
// adopted one: the handed-over state), replacing any entry of that ID.
func (r *ClientRegistry) Add(id ClientID, st ClientStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[id] = &st
}

// Remove forgets client id.
func (r *ClientRegistry) Remove(id ClientID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// update runs f on client id's entry, if any, under the registry's lock.
func (r *ClientRegistry) update(id ClientID, f func(*ClientStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.m[id]; st != nil {
		f(st)
	}
}

// Status returns a copy of client id's state; false when it is unknown
// (the returned state then has Pid -1).
func (r *ClientRegistry) Status(id ClientID) (ClientStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.m[id]; st != nil {
		return *st, true
	}
	return ClientStatus{Pid: -1}, false
}

// Register makes client id the registered client of pid, named after it.
func (r *ClientRegistry) Register(id ClientID, pid int) {
	r.update(id, func(st *ClientStatus) {
		st.Pid, st.Name, st.Registered = pid, strconv.Itoa(pid), true
	})
}

// NameCommand names an unregistered client after the command it sends
// (docs/protocol.md "Dispatch classes"); a registered client keeps its name.
func (r *ClientRegistry) NameCommand(id ClientID, name string) {
	r.update(id, func(st *ClientStatus) {
		if !st.Registered {
			st.Name = name
		}
	})
}

// SetName sets the record name (ACQUIRE's owner_name), cut to
// wire.NameLen bytes.
func (r *ClientRegistry) SetName(id ClientID, name string) {
	if len(name) > wire.NameLen {
		name = name[:wire.NameLen]
	}
	r.update(id, func(st *ClientStatus) { st.Name = name })
}

// Restrict sets the RESTRICT flags.
func (r *ClientRegistry) Restrict(id ClientID, flags uint32) {
	r.update(id, func(st *ClientStatus) { st.Restrict = flags })
}

// SetKillpath sets the kill program and its arguments (KILLPATH); of
// flags only wire.KillpathPID is kept.
func (r *ClientRegistry) SetKillpath(id ClientID, path, args string, flags uint32) {
	r.update(id, func(st *ClientStatus) {
		st.KillPath, st.KillArgs = path, args
		st.Flags = st.Flags&^wire.KillpathPID | flags&wire.KillpathPID
	})
}

// NoteKill records a signal or kill program sent by the escalation: the
// count so far, when (seconds) and whether a kill program was run.
func (r *ClientRegistry) NoteKill(id ClientID, count int, last uint64, ranKillpath bool) {
	r.update(id, func(st *ClientStatus) {
		st.KillCount, st.KillLast = count, last
		if ranKillpath {
			st.Flags |= FlagRanKillpath
		}
	})
}

// ResetKill clears the kill count once the client holds nothing.
func (r *ClientRegistry) ResetKill(id ClientID) {
	r.update(id, func(st *ClientStatus) { st.KillCount, st.KillLast = 0, 0 })
}

// MarkDead marks a registered client's pid dead; it reports whether it
// did (false when the client is unknown, unregistered or already dead).
func (r *ClientRegistry) MarkDead(id ClientID) bool {
	marked := false
	r.update(id, func(st *ClientStatus) {
		if st.Registered && !st.PidDead {
			st.PidDead, marked = true, true
		}
	})
	return marked
}

// ByPid returns the registered client of pid (the lowest Order, then
// the lowest ID, when several registered it).
func (r *ClientRegistry) ByPid(pid int) (ClientID, bool) {
	id, _, ok := r.byPid(pid)
	return id, ok
}

// byPid is ByPid with the client's state.
func (r *ClientRegistry) byPid(pid int) (ClientID, ClientStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best ClientID
	var found *ClientStatus
	for id, st := range r.m {
		if !st.Registered || st.Pid != pid {
			continue
		}
		if found == nil || st.Order < found.Order || st.Order == found.Order && id < best {
			best, found = id, st
		}
	}
	if found == nil {
		return 0, ClientStatus{}, false
	}
	return best, *found, true
}

// Record is the CLIENT record of a client at connection slot ci with
// descriptor fd and its active and last commands (docs/protocol.md
// "Record texts").
func (st ClientStatus) Record(ci, fd int, cmdActive, cmdLast uint32) wire.StateRecord {
	text := fmt.Sprintf("ci=%d fd=%d pid=%d flags=%x restricted=%x cmd_active=%d cmd_last=%d pid_dead=%d kill_count=%d kill_last=%d suspend=%d need_free=%d",
		ci, fd, st.Pid, st.Flags, st.Restrict, cmdActive, cmdLast, b2i(st.PidDead), st.KillCount, st.KillLast, 0, 0)
	return wire.StateRecord{State: wire.State{Type: wire.StateClient, Data32: uint32(int32(st.Pid)), Name: st.Name}, Text: text}
}
