// Package lease is the API for programs that hold leases: mutual exclusion
// between hosts that share storage, through the local lease daemon (ours,
// cmd/sanlock, or sanlock 3.8.5; both speak the same protocol).
//
// # Overview
//
// Every host runs a daemon. The daemon keeps this host's membership of a
// lockspace alive by renewing a lease on shared storage every few seconds;
// resource leases (one per thing to protect) are acquired through it with a
// disk-paxos ballot and belong to the process that asked. Nothing but the
// storage is shared: no network, no quorum of servers.
//
//	ctx := context.Background()
//	s, err := lease.NewSession(ctx, lease.Config{
//		Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: "/dev/shared/leases", IOTimeout: 10},
//	})
//	if err != nil { ... }
//	defer s.Close()
//
//	mu := s.Mutex("R1", "/dev/shared/leases", 1<<20)
//	if err := mu.Lock(ctx); err != nil { ... }       // blocks until held or ctx ends
//	defer mu.Unlock(ctx)
//	err = store.Write(mu.Token(), data)              // fence every write with the token
//
// # Sessions
//
// A [Session] is this process's registration with the daemon
// ($SANLOCK_RUN_DIR, or /run/sanlock, or [Config].RunDir). With
// [Config].Lockspace set, NewSession also joins the lockspace as the given
// host_id and returns once the join is complete (a few seconds; see
// docs/timing.md), or shares it when this host has already joined it.
// [Session.Done] is closed when the session can no longer hold leases: the
// lockspace failed (storage lost) or was removed, or the daemon went away;
// [Session.Err] says which. Closing the session releases all its leases.
//
// # Leases
//
// [Session.Lease] returns a handle for one resource lease ([Resource]: name,
// path, offset, shared or exclusive); [Session.Mutex] is the exclusive case
// with Lock/TryLock/Unlock names.
//
//   - [Lease.Acquire] blocks until the lease is held or ctx ends. While
//     another host (or another process here) holds it, or a ballot is lost
//     to a competitor, it retries with jittered exponential backoff; any
//     other failure (no lease at that place, storage errors, lockspace not
//     joined...) is returned at once. An owner whose host died is taken
//     over once that host's lease has timed out (8*io_timeout+60 s), and ctx
//     is honoured meanwhile. [Config].OnRetry, when set, is called before
//     each wait with the attempt's error (who holds the lease), for
//     progress output.
//   - [Lease.TryAcquire] makes one attempt and returns a [*LockedError]
//     (matching [ErrLocked]) naming the holder: the pid when it is a
//     process of this host, else the owner's host_id, generation, host
//     name and state (live, or stopped renewing: taken over once its lease
//     has timed out).
//   - [Lease.Release] gives it back.
//
// # Fencing tokens
//
// [Lease.Token] is the lease version at which the lease is held. Every
// exclusive acquisition, by any host, gets a larger one. A holder can be
// frozen (paused VM, long GC, lost storage) and resume after the lease went
// to another host; if the service it writes to remembers the largest token
// it has seen and refuses smaller ones, the late writes are rejected
// (see ExampleLease_Token).
//
// # Loss notices
//
// [Lease.Lost] is closed when a held lease stops being safe to use, and
// [Lease.Err] then returns a [*LostError] (matching [ErrLost]) with the
// [Reason]:
//
//   - [ReasonLockspaceFailed]: this host could not renew its lockspace lease
//     (its storage failed or hung). The notice comes when the daemon gives up
//     on the lockspace, 8*io_timeout after the last renewal, and before it
//     would SIGKILL holders (8*io_timeout + 40 s by default).
//   - [ReasonRequested]: a graceful REQUEST asked for the lease (made on
//     another host or on this one). A forced request SIGKILLs the holder
//     without notice.
//   - [ReasonLockspaceRemoved], [ReasonDaemonGone], [ReasonSessionClosed].
//
// On a notice, stop using what the lease protects at once. By default the
// session then releases the lease itself, so the daemon has nothing to
// escalate against and the process keeps running; set
// [Config].KeepLostLeases to release it yourself.
//
// The notices need no signal handler: the session installs a kill program
// (touch(1) on a private file, watched with inotify) that both daemons run
// instead of sending SIGTERM, then reads the lockspace states and the
// leases' request records to find out what happened, and it watches the
// registered connection for the daemon hanging up (docs/protocol.md "Kill
// program"). Between notices it checks the lockspace list every
// [Config].PollInterval with GET_LOCKSPACES, which the daemons do not
// log. A lockspace that fails while this session holds no lease in it
// ends the session when the daemon drops the lockspace (at once when no
// process holds leases in it).
//
// # Errors
//
// Every error from the daemon matches exactly one sentinel with errors.Is
// ([ErrLocked], [ErrLockspaceNotJoined], [ErrNoLease], [ErrStorage],
// [ErrCorrupt], ...; [Classify] has the table) and still unwraps to the
// [client.Error] with the raw result code. An [*Error] names the operation,
// the lease and its file and offset, and, when no daemon answers, the
// socket ("no daemon at /run/sanlock/sanlock.sock (is sanlock running?)").
// Errors of operations cut short by a context match the context's error,
// and Acquire's also the last attempt's (a [*LockedError] naming the
// holder), in one message:
//
//	lease: acquire LS:R1 at /dev/shared/leases:1048576: context deadline exceeded (last attempt: held by process 4242 on this host: file exists (-17 EEXIST))
//
// and tell what happened to errors.Is:
//
//	err := l.Acquire(ctx)
//	switch {
//	case errors.Is(err, context.DeadlineExceeded):  // timed out (still locked: errors.Is(err, lease.ErrLocked))
//	case errors.Is(err, lease.ErrNoLease):          // nothing initialised at that offset
//	}
//
// # Preparing storage
//
// A lockspace and its resource leases are written once, before any host
// uses them: with [InitLockspace] and [InitResource], which go through
// the daemon (its permissions and direct I/O, like `sanlock client init`)
// and refuse to write over a lease they find there ([ErrExists]; see
// [InitOptions].Overwrite):
//
//	opt := lease.InitOptions{}
//	err := lease.InitLockspace(ctx, lease.Lockspace{Name: "LS", Path: "/dev/shared/leases", IOTimeout: 10}, opt)
//	...
//	err = lease.InitResource(ctx, lease.Resource{Lockspace: "LS", Name: "R1", Path: "/dev/shared/leases", Offset: 1 << 20}, opt)
//
// or with the command-line tool:
//
//	sanlock direct init -o 10 -s LS:0:/dev/shared/leases:0
//	sanlock direct init -r LS:R1:/dev/shared/leases:1M
//
// The on-disk format is in docs/ondisk.md, the protocol in
// docs/protocol.md and every delay in docs/timing.md.
//
// # Limits
//
// Holding is per process and per host: a second Acquire of a lease this
// process already holds through another Lease value waits like any other
// contender. One Session runs one daemon command at a time (the daemon
// handles one per process). The lower-level [client] package covers the
// rest of the protocol.
package lease
