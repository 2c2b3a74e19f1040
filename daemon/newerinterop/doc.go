// Package newerinterop holds tests that drive the real sanlock 5.1.1
// daemon (from the Debian sid tree of internal/debtree) with the commands
// and flags that 3.8.5 does not have: acquire2 (41),
// read_lockspace_host (42), init_lockspace_host (43), set_host (44),
// add_lockspace NODELAY, get_hosts LOCAL, write_lockspace LS_FLAGS,
// set_config IO_TIMEOUT, release NO_DISK and FOR_CLIENT_ID. Each request
// is sent twice: as raw bytes from Go on the host (so the reply bytes can
// be pinned) and through libsanlock 5.1.1 in the C driver of
// internal/debtree; TestRequestsAsLibsanlock checks with strace that the
// raw requests are the library's, byte for byte. The expected answers in the tests are what 5.1.1
// answered (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
// TestOursBeside511 sends the same cases to our daemon and requires the
// same answers, except the differences docs/compat.md lists;
// TestAcquire2Held runs ours and 5.1.1 in one lockspace. TestTrixie395
// pins what 3.9.5 answers to the same requests; TestLibrariesLookAlike
// shows that the 3.9.5 and 5.1.1 tools send the same bytes.
//
// The package has tests only. They need root and the sid tree
// (scripts/debian-trees.sh); they are skipped without them unless
// CI=true.
package newerinterop
