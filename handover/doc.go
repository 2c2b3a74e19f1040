// Package handover lets a running daemon hand its listening socket, client
// connections, pid file, wdmd sessions and lease state over to a newly
// started image of itself (issue 14, docs/upgrade.md), so that an upgrade
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
// The package depends on the standard library and golang.org/x/sys/unix
// only, and on no other package of the module.
package handover
