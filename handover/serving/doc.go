// Package serving is the serving daemon's side of a handover
// (docs/upgrade.md) that needs none of the daemon's internals: the
// quiesce gate of the accept loop and the connection readers, the
// pending requests a quiesce cancels for the next image to run again,
// descriptor duplicates that leave a socket's blocking mode alone, the
// check of the image to start and the environment's format override,
// the adoption of the listening socket, and the old image's exit.
// Package daemon wires them to its Server and connections.
package serving
