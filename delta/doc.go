// Package delta implements sanlock's host_id ("delta") leases: acquiring,
// renewing and releasing a host's slot in a lockspace, the timing model
// derived from io_timeout, and the per-lockspace runtime state the daemon
// publishes (host status table, renewal history, own-lease check, bitmap
// notifications and host events). See docs/delta.md.
//
// # Shape
//
// Decisions are pure functions over decoded diskfmt records and a "now"
// passed in as whole seconds of our own monotonic clock: PlanAcquire,
// CheckHeldLease, NewAcquireRecord, CheckAcquired, CheckRenewRecord,
// NewRenewRecord, NewReleaseRecord, CheckOwnLease, HostStateOf,
// HostTable.Process, Notifier.Build/SetEvent, History. The drivers (Lease's
// Acquire, Renew and Release, and Lockspace.Run) only read, decide, write
// and sleep, through an injected diskfmt.Device and Clock.
//
// # Time
//
// A lease timestamp is the writer's own monotime. Other hosts' timestamps
// are never compared with ours or with each other: a host is judged alive
// by whether its lease changed between two of our reads, and elapsed time
// is always measured on our Clock (docs/delta.md "Terms and clock", "Watching other hosts").
//
// # I/O
//
// Every device call carries a context whose deadline is the spec's per-I/O
// timeout (own io_timeout; host_dead_seconds for the renewal write). Each
// I/O uses a freshly allocated buffer that is dropped if the I/O fails, so
// a device that completes late can never write into memory we reuse. A
// failed I/O returns an error that rescode.CodeOf maps to the sanlock
// result (SANLK_AIO_TIMEOUT -202 for a timeout).
//
// # Results
//
// Functions return errors; rescode.CodeOf gives the sanlock value:
// rescode.ErrHostIDBusy (-262) when another live host holds or wins the
// host_id, rescode.ErrGeneric (-201) for an acquire aborted by ctx,
// rescode.ErrRenewOwner (-260) / rescode.ErrRenewDiff (-261) when our lease
// was overwritten, and the diskfmt.ErrLeader* verify codes.
package delta
