package daemon

import (
	"context"

	"github.com/gosanlock/gosanlock/client"
)

// LockspaceManager is what the daemon core needs from the lockspace (delta
// lease) layer. Methods may be called concurrently from many connections.
// Results are wire results: 0, -errno or SANLK_* codes (docs/protocol.md "Result codes").
type LockspaceManager interface {
	// Add joins ls (ADD_LOCKSPACE, docs/protocol.md "Commands" #2). flags may hold
	// client.AddAsync; ioTimeout 0 means the daemon default. Without
	// AddAsync it returns when the host_id lease is held or has failed.
	Add(ctx context.Context, ls client.Lockspace, flags, ioTimeout uint32) int32
	// Rem leaves ls (REM_LOCKSPACE, #3); flags: client.RemAsync, RemUnused.
	Rem(ctx context.Context, ls client.Lockspace, flags uint32) int32
	// Inq reports whether ls is joined (INQ_LOCKSPACE, #16): 0, -ENOENT,
	// -EINPROGRESS; flags may hold client.InqWait.
	Inq(ctx context.Context, ls client.Lockspace, flags uint32) int32
	// List returns every lockspace in GET_LOCKSPACES order: joined, then
	// being removed, then being added, with LSFAdd/LSFRem in Flags.
	List() []client.Lockspace
	// HostStatus returns the HOST records of HOST_STATUS for lockspace
	// name, or a negative result (-ENOSPC when not joined).
	HostStatus(name string) ([]client.StateRecord, int32)
	// Count is the number of lockspaces in any state; the daemon refuses a
	// non-forced shutdown while it is non-zero (docs/cli.md "Signals and exit").
	Count() int
	// StatusRecords returns the LOCKSPACE records of STATUS (docs/protocol.md "Commands" #5,
	// "Record texts"), each with its Lockspace tail.
	StatusRecords() []client.StateRecord
	// ShutdownAll is the forced shutdown: kill the registered pids using
	// lockspaces (SIGKILL), drop every lockspace, return when done.
	ShutdownAll(ctx context.Context) error
}

// ResourceManager is what the daemon core needs from the resource (paxos
// lease) layer.
type ResourceManager interface {
	// StatusRecords returns the RESOURCE records of STATUS (docs/protocol.md "Record texts"),
	// each with its Resource tail (and disks).
	StatusRecords() []client.StateRecord
	// ClientDead is called once when a registered connection ends (EOF or
	// error): release the leases of cl, or make persistent ones orphans
	// (docs/protocol.md "Registration"). It runs on its own goroutine.
	ClientDead(cl *ClientInfo)
}

// ClientInfo identifies a registered client to the managers.
type ClientInfo struct {
	Slot int // connection slot ("ci")
	Pid  int // SO_PEERCRED pid recorded at REGISTER

	conn *Conn
}

// NoLockspaces is the LockspaceManager stub used until the delta layer
// plugs in: there are never any lockspaces, and joining is not supported.
type NoLockspaces struct{}

var _ LockspaceManager = NoLockspaces{}

// Add returns -ENOSYS (-38): lockspaces are not implemented by the stub.
func (NoLockspaces) Add(context.Context, client.Lockspace, uint32, uint32) int32 { return -38 }

// Rem returns -ENOENT.
func (NoLockspaces) Rem(context.Context, client.Lockspace, uint32) int32 { return client.RvENOENT }

// Inq returns -ENOENT.
func (NoLockspaces) Inq(context.Context, client.Lockspace, uint32) int32 { return client.RvENOENT }

// List returns nothing.
func (NoLockspaces) List() []client.Lockspace { return nil }

// HostStatus returns -ENOSPC, as sanlock does for a lockspace not joined.
func (NoLockspaces) HostStatus(string) ([]client.StateRecord, int32) { return nil, client.RvENOSPC }

// Count returns 0.
func (NoLockspaces) Count() int { return 0 }

// StatusRecords returns nothing.
func (NoLockspaces) StatusRecords() []client.StateRecord { return nil }

// ShutdownAll does nothing.
func (NoLockspaces) ShutdownAll(context.Context) error { return nil }

// NoResources is the ResourceManager stub: no leases are ever held.
type NoResources struct{}

var _ ResourceManager = NoResources{}

// StatusRecords returns nothing.
func (NoResources) StatusRecords() []client.StateRecord { return nil }

// ClientDead does nothing.
func (NoResources) ClientDead(*ClientInfo) {}
