// Package reexec holds the parts of the daemon's live reexec (issue 14,
// docs/upgrade.md) that do not need the daemon's internals: descriptor
// duplication without touching a socket's blocking mode, the pending
// request rules and their reply interception, the environment's format
// override and the old image's exit. Package daemon wires them to its
// Server and connections.
package reexec
