package client

import "context"

// Typed flags. The untyped constants of proto.go (AcquireLVB, RemAsync...)
// stay for the libsanlock-shaped methods; the typed ones below are what the
// *Ctx methods take, so a flag of one command cannot be passed to another
// by mistake (several share the value 0x1).

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

// AcquireCtx is Acquire bounded by ctx (see Reg.WithContext), with typed flags.
func (g *Reg) AcquireCtx(ctx context.Context, res []Resource, flags AcquireFlags, opt *Options) error {
	return g.WithContext(ctx).Acquire(res, uint32(flags), opt)
}

// ReleaseCtx is Release bounded by ctx, with typed flags.
func (g *Reg) ReleaseCtx(ctx context.Context, res []Resource, flags ReleaseFlags) (int, error) {
	return g.WithContext(ctx).Release(res, uint32(flags))
}

// InquireCtx is Inquire bounded by ctx; it returns the held leases parsed
// from the state string (LVer set for exclusive ones, ResShared in Flags
// for shared ones).
func (g *Reg) InquireCtx(ctx context.Context) ([]Resource, error) {
	s, _, err := g.WithContext(ctx).Inquire()
	if err != nil {
		return nil, err
	}
	return ParseState(s)
}

// AddLockspaceCtx is AddLockspace bounded by ctx, with typed flags.
func (c *Client) AddLockspaceCtx(ctx context.Context, ls *Lockspace, flags AddFlags, ioTimeout uint32) error {
	return c.WithContext(ctx).AddLockspace(ls, uint32(flags), ioTimeout)
}

// RemLockspaceCtx is RemLockspace bounded by ctx, with typed flags.
func (c *Client) RemLockspaceCtx(ctx context.Context, ls *Lockspace, flags RemFlags) error {
	return c.WithContext(ctx).RemLockspace(ls, uint32(flags))
}

// RequestCtx is Request bounded by ctx, with a typed force mode.
func (c *Client) RequestCtx(ctx context.Context, res *Resource, flags uint32, mode ForceMode) error {
	return c.WithContext(ctx).Request(res, flags, uint32(mode))
}
