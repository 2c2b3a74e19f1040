// Package handover lets a running daemon hand its listening socket, client
// connections, pid file, wdmd sessions and lease state over to a newly
// started image of itself (docs/upgrade.md), so that an upgrade
// or a restart drops no lease.
//
// The old image calls Handover with a Source (Snapshot, Quiesce, Resume);
// the new image calls Receive, Ready and TookOver, and acts only once
// TookOver has returned. Any failure before that leaves the old image
// serving with everything intact and the new image killed.
//
// State is a set of plain structs: the daemon maps its internals onto it.
// Encode and Decode turn it into a versioned, SHA-256-checksummed,
// size-bounded blob; Decode is strict and validates every invariant the
// new image relies on.
//
// One vocabulary serves the whole live upgrade, in every package: a
// handover is the exchange; the old image hands over (HandoverState,
// Handover, HandoverFile: what each part gives the state) and resumes
// serving if the handover fails (Resume); the new image adopts (Adopt,
// AdoptSession, PrepareAdoption, RunAdopted: what each part rebuilds
// from the state). "reexec" names only what starts a handover to the
// daemon's own binary: the command sanlock client reexec and SIGUSR1.
// Package handover/serving holds the serving daemon's side that needs
// none of its internals (quiesce gate, pending requests, descriptor
// duplicates).
//
// The package depends on the standard library and golang.org/x/sys/unix
// only, and on no other package of the module.
package handover
