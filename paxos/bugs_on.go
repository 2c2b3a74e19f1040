//go:build simbugs

package paxos

// BugsCompiled reports whether this build contains the broken variants
// that Host.TestBugs selects. Only a build with the simbugs tag does: the
// simulator's self-test (go test -tags simbugs ./testdisk/sim).
const BugsCompiled = true
