// Package wdmd is the watchdog multiplexer of sanlock (3.8.5, 3.9.5 and
// 5.1.1) as a pure algorithm: the test loop that decides, every test
// interval, whether the watchdog device may be pinged, the per-connection
// expiry records, the refcounts that keep the daemon alive, script tests,
// device selection, the device opened on demand by OPEN_WATCHDOG (or
// armed from the start, as 3.8.5), the --trytimeout procedure, and the
// 176-byte record of the wdmd socket protocol.
// See docs/wdmd.md.
//
// # Shape
//
// The decision "ping or not" is Evaluate: a pure function of the expiry
// records, the script results and "now". Monitor holds the state of one
// daemon (client slots, test time and interval, the device) and turns
// socket events, signals and the passing of time into calls on an injected
// Driver (the watchdog device), ScriptRunner (script tests) and a
// *zap.Logger (Config.Log).
// Monitor.Run is the single-threaded event loop; it reads time only from
// an injected Clock, so tests run it under testing/synctest with an
// emulated device (package wdmd/testdev) and check whole timelines.
//
// The real device is in package wdmd/watchdog, the client library that the
// sanlock daemon uses is wdmd/wdmdclient, and the socket daemon around
// Monitor is cmd/wdmd.
//
// # Time
//
// Like wdmd 3.8.5, every time is whole seconds of CLOCK_MONOTONIC, the
// clock sanlock uses for its renewal timestamps, so the renewal and expiry
// values that clients send compare directly with "now".
//
// # Timeline (defaults: test interval 10, fire timeout 60, margin 10)
//
// A client with expiry E fails the test at now >= E and raises a warning
// at now >= E-10. A warning or failure blocks the ping for everybody and
// closes the device without the magic character, which makes the kernel
// ping one last time; so the device fires 60 s after a moment in
// [E-10, E), before E+60 = the host_dead_seconds other hosts wait
// (L + 8*io_timeout + 60 for sanlock's expiry E = L + 8*io_timeout).
// When every source passes again, the device is reopened and pinged.
// With another fire timeout F the interval and the margin follow it
// (IntervalFor; the margin at least 2 s), and the device fires F s after
// the close, before E+F.
package wdmd
