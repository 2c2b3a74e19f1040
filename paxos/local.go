package paxos

import (
	"github.com/gosanlock/gosanlock/rescode"
)

// Acquire command flags (SANLK_ACQUIRE_*, header cmd_flags).
const (
	AcquireLVB         = 0x1
	AcquireOrphan      = 0x2
	AcquireOrphanOnly  = 0x4
	AcquireOwnerNowait = 0x8
)

// LocalState is where this host already has the resource (same lockspace
// and name), as the daemon's resource lists say.
type LocalState struct {
	OnRem, OnAdd bool // release or acquire in progress
	Held         bool // on the held list
	HeldShared   bool // ... in shared mode
	Orphan       bool // on the orphan list
	OrphanShared bool // ... in shared mode
}

// LocalAction is the outcome of the local checks before any disk I/O.
type LocalAction int

const (
	LocalFail  LocalAction = iota // return the code
	LocalJoin                     // add the token to the held shared resource; no I/O
	LocalAdopt                    // adopt the orphan (keep its lver); no I/O
	LocalDisk                     // create the resource and run the disk acquire
)

// CheckLocal is the table of docs/paxos.md "Local checks" for one resource: shared asks
// for SH, cmdFlags are the acquire flags. Quirk Q1 is kept: ORPHAN_ONLY
// only refuses a missing orphan when the LVB bit (0x1) is also set.
func CheckLocal(s LocalState, shared bool, cmdFlags uint32) (LocalAction, rescode.Code) {
	orphanFlags := cmdFlags&(AcquireOrphan|AcquireOrphanOnly) != 0
	switch {
	case s.OnRem:
		return LocalFail, rescode.ErrEAGAIN
	case s.OnAdd:
		return LocalFail, rescode.ErrEBUSY
	case s.Held && shared && s.HeldShared:
		return LocalJoin, 0
	case s.Held:
		return LocalFail, ErrEEXIST
	case s.Orphan && !orphanFlags:
		return LocalFail, ErrEUCLEAN
	case s.Orphan && s.OrphanShared != shared:
		return LocalFail, ErrEUCLEAN
	case s.Orphan:
		return LocalAdopt, 0
	case cmdFlags&AcquireLVB != 0 && cmdFlags&AcquireOrphanOnly != 0:
		return LocalFail, rescode.ErrENOENT
	}
	return LocalDisk, 0
}
