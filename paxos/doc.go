// Package paxos implements sanlock's resource leases ("paxos leases"): the
// disk-paxos ballot over 1..4 disks, the owner liveness check and dead-owner
// takeover, release, shared mode with mode blocks, SH↔EX convert, request
// records, the lock value block and the owner queries. Spec:
// docs/paxos.md (on-disk layouts in docs/ondisk.md "Leader record", "Checksum",
// "Resource lease (paxos lease)").
//
// # Shape
//
// Decisions are pure functions over decoded diskfmt records and "now" (our
// monotime in whole seconds) passed as a value: ChooseMbal, DecideStart,
// DecideRetry, EvalBallotRead, Phase2Dblock, CommitLeader, OwnerWait.Check,
// HostLive, DecideRelease, ReleaseLeader, DecideRequest, DecideExamine,
// CheckLocal, ResourceOwners, TestResourceOwners. The drivers (Lease.Acquire,
// Held.Release, Held.Convert, Lease.Request, ReadResourceOwners) only read,
// decide, write and sleep.
//
// The acquire driver is one function per step group of docs/paxos.md
// "Acquire algorithm" and "Ballot" (acquire.go: readLeader, waitOwner,
// ballotLoop, ballot with phase1 and phase2, commit), so each can be read
// against its steps. Host.Fairness holds the knobs that change only when a
// host runs its next ballot (fairness.go), never safety.
//
// The deliberately broken variants of the simulator's self-test (Bugs,
// bugs.go) are compiled only with the simbugs build tag: elsewhere
// BugsCompiled is the constant false and their branches are not in the
// code.
//
// Nothing here reads a clock, sleeps on its own, or uses global randomness:
// time and sleeps come from Host.Clock, the 0–1 s ballot and shared-retry
// backoffs from Host.Rand, and the liveness of other hosts from
// Host.Live (the lockspace's host status table plus a read of a host's delta
// lease). Another host's timestamps are only compared for change, never with
// our clock.
//
// # I/O
//
// Every I/O is issued alone, disk after disk, with a fresh buffer and a
// context whose deadline is the lockspace io_timeout (a timeout is
// SANLK_AIO_TIMEOUT, -202). Majority rules follow docs/paxos.md "Several disks": ballot and
// leader I/O need more than half of the disks; the first read of an acquire
// needs one good disk for the dblocks but a majority of identical leaders;
// request records, the LVB, owner dblock and mode block reads use disk 0.
// An uncontended exclusive acquire costs 6 I/Os per disk and its release 3,
// as in sanlock (docs/paxos.md "I/O counts"; iocount_test.go checks the exact sequence).
//
// # Results
//
// Failures are *Error values whose Code (rescode.CodeOf) is the sanlock
// result; for -243..-247 Error.Leader is the leader that decided it, so a
// loser learns the owner.
//
// # Scope
//
// The daemon keeps the per-host resource lists (add, held, rem, orphan),
// tokens, client pids and signals. This package gives it the local-check
// table (CheckLocal), the examine decision (DecideExamine, ExamineSignal)
// and the on-disk work for one resource at a time (Lease, Held).
package paxos
