// Package daemon is the server side of `sanlock daemon` (docs/cli.md "Daemon",
// docs/protocol.md "Transport", "Header", "Dispatch classes", "Registration"): configuration,
// startup (run directory, lock file, host name, privileges), logging in sanlock's line format, and
// the unix-socket server that dispatches the libsanlock protocol.
//
// # Usage
//
// The CLI (cmd/) does, in order:
//
//  1. cfg := config.DefaultConfig() (package daemon/config); apply sanlock.conf with
//     cfg.ApplyFile (which keeps a warning per line it does not act on:
//     cfg.FileWarnings, printed by the CLI, logged by Start), each daemon
//     option with cfg.ApplyOption, then cfg.ApplyEnv(nil) (SANLOCK_RUN_DIR,
//     SANLOCK_PRIVILEGED).
//  2. If Daemonize(cfg) reports parent, exit 0 (the background child runs
//     the daemon; without -D this replaces sanlock's fork). If it fails
//     with ErrLocked, another daemon runs: exit 1.
//  3. err := Run(ctx, cfg, deps); exit 1 if err != nil, else 0.
//
// The lease work is the lease manager (package manager). Start (and
// Serve, and the adoption at a live re-exec) builds it from Deps.Manager,
// a manager.Setup whose zero value is production and in which tests put
// in-memory disks or fake kills, completed with what the daemon knows (its
// logger, context, host name, options and client registry); it then
// registers the lockspace, resource and disk commands, whose handlers
// decode a request, call the manager and turn its error into the result
// code of the reply. Server.Manager returns it, and Server.Handle
// registers a Handler for any command number. Serve runs the daemon on any
// listener (in-memory connections in tests).
//
// # Connections
//
// Each accepted connection gets a slot (the "ci" of STATUS, first free slot
// from 2; 0 and 1 are the internal helper and listener records) and its own
// goroutine, which reads one request at a time with wire.ReadRequest and
// runs its handler. Handlers of different connections run concurrently.
// Requests the C daemon would silently ignore (bad magic, unknown command,
// protocol major > 0) and malformed streams (announced length over
// Config.MaxPayload, truncated payload) close that connection only; a
// handler panic is recovered and logged. A registered connection that ends
// runs the manager's Resources.ClientDead with its manager.ClientID.
//
// # Logging
//
// The logger is zap with the cores of package internal/sanlog, which write
// sanlock lines
//
//	2026-11-22 08:33:40 437 [9457]: sanlock daemon started 3.8.5 host a5f2...vm (vm)
//
// (local time, CLOCK_MONOTONIC seconds, thread id = daemon pid unless a
// sanlog.TID field is given, then sanlog.Prefix and the message; other
// fields follow as key=value). Sinks: the log file at -L priority, syslog
// at -S priority, stderr with -D and the 1 MiB ring returned by LOG_DUMP.
// zap levels map to priorities by sanlog.Priority. The settings are package
// daemon/config's.
package daemon
