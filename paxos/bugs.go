package paxos

// Bugs selects deliberately broken variants of the algorithm. They exist
// only so that the simulator in testdisk/sim can prove its checker catches
// unsafe code, and they are compiled only with the simbugs build tag
// (BugsCompiled): in any other build, the shipped binaries among them,
// Host.bug is the constant false and the variants' branches are not in
// the code. The zero value is the correct algorithm. With any of them
// set, the leader check before committing another host's value is left
// out as well (so each variant keeps the I/O sequence its pinned seeds
// were found with).
type Bugs uint32

const (
	// BugSkipPhase2Read: the ballot trusts its phase-2 write and commits
	// without reading the other dblocks back, so it misses a higher ballot
	// that started meanwhile.
	BugSkipPhase2Read Bugs = 1 << iota
	// BugLeaderBeforePhase2: the ballot commits (writes the leader) straight
	// after phase 1, before any phase-2 write and read.
	BugLeaderBeforePhase2
	// BugClockLiveness: the owner liveness check also declares an owner
	// dead when its delta-lease timestamp is more than host_dead_seconds
	// behind our own clock: it compares clocks of different hosts.
	BugClockLiveness
	// BugRepeatLver: acquire ignores leaders newer than the one on disk
	// that it saw before (no DecideRollback check) and accepts a value of
	// an earlier life of its host_id, as sanlock does: after a late leader
	// write a version can be handed out twice, or after a later one. A
	// failed shared acquire writes sanlock's zero dblock (quirk Q2).
	BugRepeatLver
	// BugStaleShared: an exclusive acquire clears another host's SHARED
	// mode block on the word of our host table alone, and a released
	// entry (timestamp 0) counts as dead even when the mode block carries
	// a newer generation than the table knows (the hazard the simulator
	// found with a late main loop, seed 3).
	BugStaleShared
	// BugEraseRetract: an acquire or convert that failed after its ballot's
	// phase 2 started (retract) wipes our dblock, as sanlock's erase does,
	// although the leader write may have landed; and an acquire takes a
	// value of ours from an earlier acquire as its own grant.
	BugEraseRetract
	// BugNoTimeoutByTime: the owner check ignores the NO_TIMEOUT flag of
	// the owner's delta lease and declares it dead by time, as for an
	// ordinary lockspace, although such a host has no watchdog.
	BugNoTimeoutByTime

	// anyBug matches every variant.
	anyBug = ^Bugs(0)
)

// bug reports whether the broken variant x (or, for anyBug, any variant)
// is on for this host. It is false in a build without the simbugs tag,
// whatever TestBugs holds.
func (h *Host) bug(x Bugs) bool { return BugsCompiled && h.TestBugs&x != 0 }

// String names the set bits.
func (b Bugs) String() string {
	names := []string{"skip-phase2-read", "leader-before-phase2", "clock-liveness", "repeat-lver", "stale-shared", "erase-retract", "notimeout-by-time"}
	s := ""
	for i, n := range names {
		if b&(1<<i) != 0 {
			if s != "" {
				s += "+"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// ParseBugs is the inverse of String ("none" or "" for none).
func ParseBugs(s string) (Bugs, bool) {
	var b Bugs
	if s == "" || s == "none" {
		return 0, true
	}
	names := map[string]Bugs{"skip-phase2-read": BugSkipPhase2Read,
		"leader-before-phase2": BugLeaderBeforePhase2, "clock-liveness": BugClockLiveness,
		"repeat-lver": BugRepeatLver, "stale-shared": BugStaleShared, "erase-retract": BugEraseRetract,
		"notimeout-by-time": BugNoTimeoutByTime}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '+' {
			v, ok := names[s[start:i]]
			if !ok {
				return 0, false
			}
			b |= v
			start = i + 1
		}
	}
	return b, true
}
