//go:build !simbugs

package paxos

// BugsCompiled reports whether this build contains the broken variants
// that Host.TestBugs selects. Without the simbugs tag it is false: every
// branch of a variant is guarded by it (Host.bug), so the compiler drops
// them and Host.TestBugs has no effect.
const BugsCompiled = false
