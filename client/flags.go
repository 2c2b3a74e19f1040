package client

// Typed flags: the methods take these, so a flag of one command cannot be
// passed to another by mistake (several share the value 0x1). The untyped
// constants re-exported from package wire (AcquireLVB, RemAsync...) convert
// to them implicitly.

// AcquireFlags are ACQUIRE command flags.
type AcquireFlags uint32

// ACQUIRE flags.
const (
	AcquireWithLVB     AcquireFlags = AcquireLVB         // enable the lock value block
	AcquireAdoptOrphan AcquireFlags = AcquireOrphan      // adopt an orphan of the same resource, else acquire
	AcquireOnlyOrphan  AcquireFlags = AcquireOrphanOnly  // adopt an orphan or fail with -ENOENT
	AcquireNoWait      AcquireFlags = AcquireOwnerNowait // fail with -247 instead of waiting for a dead owner
)

// ReleaseFlags are RELEASE command flags.
type ReleaseFlags uint32

// RELEASE flags.
const (
	ReleaseAll     ReleaseFlags = RelAll
	ReleaseRename  ReleaseFlags = RelRename
	ReleaseOrphans ReleaseFlags = RelOrphan
)

// AddFlags are ADD_LOCKSPACE flags.
type AddFlags uint32

// AddAsyncFlag makes ADD_LOCKSPACE return at once; poll InqLockspace.
const AddAsyncFlag AddFlags = AddAsync

// RemFlags are REM_LOCKSPACE flags.
type RemFlags uint32

// REM_LOCKSPACE flags.
const (
	RemAsyncFlag  RemFlags = RemAsync
	RemUnusedFlag RemFlags = RemUnused
)

// ForceMode is how REQUEST asks the holder to let go.
type ForceMode uint32

// REQUEST force modes.
const (
	ForceNone     ForceMode = 0           // only record the request
	ForceKill     ForceMode = ReqForce    // SIGKILL the holder
	ForceGraceful ForceMode = ReqGraceful // run the holder's kill program, else SIGTERM
)
