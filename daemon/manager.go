package daemon

import (
	"context"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// LockspaceManager is what the daemon core needs from the lockspace (delta
// lease) layer; *manager.Lockspaces is the real one. Methods may be called
// concurrently from many connections. Errors carry the wire results
// (rescode.CodeOf: -errno or SANLK_* codes, docs/protocol.md "Result codes").
type LockspaceManager interface {
	// Add joins a lockspace (ADD_LOCKSPACE, docs/protocol.md "Commands" #2).
	Add(ctx context.Context, req manager.AddRequest) error
	// Rem leaves a lockspace (REM_LOCKSPACE, #3).
	Rem(ctx context.Context, req manager.RemRequest) error
	// Inq reports whether a lockspace is joined (INQ_LOCKSPACE, #16): nil,
	// -ENOENT, -EINPROGRESS.
	Inq(ctx context.Context, req manager.InqRequest) error
	// List returns every lockspace in GET_LOCKSPACES order: joined, then
	// being removed, then being added, with LSFAdd/LSFRem in Flags.
	List() []wire.Lockspace
	// HostStatus returns the HOST records of HOST_STATUS for lockspace
	// name, or an error (-ENOSPC when not joined).
	HostStatus(name string) ([]wire.StateRecord, error)
	// Count is the number of lockspaces in any state; the daemon refuses a
	// non-forced shutdown while it is non-zero (docs/cli.md "Signals and exit").
	Count() int
	// StatusRecords returns the LOCKSPACE records of STATUS (docs/protocol.md "Commands" #5,
	// "Record texts"), each with its Lockspace tail.
	StatusRecords() []wire.StateRecord
	// ShutdownAll is the forced shutdown: kill the registered pids using
	// lockspaces (SIGKILL), drop every lockspace, return when done.
	ShutdownAll(ctx context.Context) error
}

// ResourceManager is what the daemon core needs from the resource (paxos
// lease) layer; *manager.Resources is the real one.
type ResourceManager interface {
	// StatusRecords returns the RESOURCE records of STATUS (docs/protocol.md "Record texts"),
	// each with its Resource tail (and disks).
	StatusRecords() []wire.StateRecord
	// ClientDead is called once when a registered connection ends (EOF or
	// error): release the leases of cl, or make persistent ones orphans
	// (docs/protocol.md "Registration"). It runs on its own goroutine.
	ClientDead(id manager.ClientID)
}

var (
	_ LockspaceManager = (*manager.Lockspaces)(nil)
	_ ResourceManager  = (*manager.Resources)(nil)
)

// ClientInfo identifies a registered client to the managers.
type ClientInfo struct {
	ID   manager.ClientID
	Slot int // connection slot ("ci")
	Pid  int // SO_PEERCRED pid recorded at REGISTER
}

// NoLockspaces is the LockspaceManager stub used until the delta layer
// plugs in: there are never any lockspaces, and joining is not supported.
type NoLockspaces struct{}

var _ LockspaceManager = NoLockspaces{}

// Add returns -ENOSYS (-38): lockspaces are not implemented by the stub.
func (NoLockspaces) Add(context.Context, manager.AddRequest) error { return rescode.Code(-38) }

// Rem returns -ENOENT.
func (NoLockspaces) Rem(context.Context, manager.RemRequest) error { return rescode.ErrENOENT }

// Inq returns -ENOENT.
func (NoLockspaces) Inq(context.Context, manager.InqRequest) error { return rescode.ErrENOENT }

// List returns nothing.
func (NoLockspaces) List() []wire.Lockspace { return nil }

// HostStatus returns -ENOSPC, as sanlock does for a lockspace not joined.
func (NoLockspaces) HostStatus(string) ([]wire.StateRecord, error) { return nil, rescode.ErrENOSPC }

// Count returns 0.
func (NoLockspaces) Count() int { return 0 }

// StatusRecords returns nothing.
func (NoLockspaces) StatusRecords() []wire.StateRecord { return nil }

// ShutdownAll does nothing.
func (NoLockspaces) ShutdownAll(context.Context) error { return nil }

// NoResources is the ResourceManager stub: no leases are ever held.
type NoResources struct{}

var _ ResourceManager = NoResources{}

// StatusRecords returns nothing.
func (NoResources) StatusRecords() []wire.StateRecord { return nil }

// ClientDead does nothing.
func (NoResources) ClientDead(manager.ClientID) {}

// result is the wire result of a manager error: 0, -errno or a SANLK_*
// code (the only place errors become numbers).
func result(err error) int32 { return int32(rescode.CodeOf(err)) }
