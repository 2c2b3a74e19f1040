package paxos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// AcquireRequest is one resource acquire as the daemon passes it down
// (docs/paxos.md "Local checks" step 1).
type AcquireRequest struct {
	Shared      bool   // SANLK_RES_SHARED
	OwnerNowait bool   // SANLK_ACQUIRE_OWNER_NOWAIT
	Lver        uint64 // SANLK_RES_LVER: required current lver (0 = any)
	NumHosts    uint64 // SANLK_RES_NUM_HOSTS: new num_hosts (0 = keep)
	LVB         bool   // SANLK_ACQUIRE_LVB: read the lock value block

	// Guard, if set, is asked before each write of the acquire (guard.go).
	Guard WriteGuard
}

// ConvertRequest is one Convert of a held lease.
type ConvertRequest struct {
	Shared      bool // convert to shared; false: to exclusive
	OwnerNowait bool // SANLK_CONVERT_OWNER_NOWAIT

	// Guard, if set, is asked before each write of the convert (guard.go).
	Guard WriteGuard
}

// Held is a resource lease this host holds, exclusive or shared: what the
// daemon keeps in its resource struct (r.leader, r.dblock, flags, LVB). A
// Held is not safe for concurrent use; the daemon serialises operations on
// one resource.
type Held struct {
	lease *Lease
	// Leader is the last leader we wrote or accepted; Dblock our last
	// ballot dblock.
	Leader diskfmt.Leader
	Dblock diskfmt.Dblock
	// Geometry is the lease's own sizes (from its leader).
	Geometry diskfmt.Geometry
	shared   bool

	eraseAll   bool // R_ERASE_ALL
	undoShared bool // R_UNDO_SHARED

	lvb      []byte // nil when acquired without LVB
	lvbDirty bool   // R_LVB_WRITE_RELEASE
}

// Shared reports whether the lease is held in shared mode.
func (r *Held) Shared() bool { return r.shared }

// Lver is the lease version of an exclusive hold (what inquire reports); 0
// for shared.
func (r *Held) Lver() uint64 {
	if r.shared {
		return 0
	}
	return r.Leader.Lver
}

// Lease returns the lease this hold belongs to.
func (r *Held) Lease() *Lease { return r.lease }

func isOwnedCode(err error) bool {
	return errCode(err, rescode.ErrAcquireIDLive, rescode.ErrAcquireOwned, rescode.ErrAcquireOther)
}

// Acquire acquires the lease (docs/paxos.md "Local checks" steps 1–10
// after the local checks, and "Shared acquire"/"Clearing dead shared
// holders" for shared mode). On failure it undoes what it did on disk and
// returns an *Error whose Leader is the blocking or committed leader for
// -243..-247. Its steps: acquireRetrying (the paxos acquire, retried while
// a shared acquire meets a short hold), acquireFailed or finishAcquire.
func (l *Lease) Acquire(ctx context.Context, req AcquireRequest) (*Held, error) {
	if err := l.validate(); err != nil {
		return nil, wrap("acquire", err, nil)
	}
	if req.Guard != nil {
		// The acquire runs on a guarded copy of l; the hold it returns
		// keeps l, so its later releases and converts are unguarded.
		g := req.Guard
		req.Guard = nil
		r, err := l.guardedBy(g).Acquire(ctx, req)
		if r != nil {
			r.lease = l
		}
		return r, err
	}
	st := l.newState()
	ld, done, err := l.acquireRetrying(ctx, req, st)
	if done {
		return nil, wrap("acquire", err, &ld)
	}
	l.Host.noteRival(l.Name, st.contended || isOwnedCode(err), err == nil)
	r := &Held{lease: l, shared: req.Shared, Geometry: l.geometry(st)}
	if err != nil {
		return nil, l.acquireFailed(ctx, r, st, ld, err)
	}
	r.Leader, r.Dblock = ld, st.dblock
	if err := l.finishAcquire(ctx, r, req, st); err != nil {
		return nil, err
	}
	return r, nil
}

// acquireRetrying runs the paxos acquire for req. A shared acquire that
// finds the lease owned under a short hold (LFL_SHORT_HOLD: another shared
// acquirer's brief exclusive hold) is retried up to Host.ShRetries times
// after a random backoff ("Shared acquire"). done: err ends Acquire as it
// is (the retries ran out, or the backoff was cancelled).
func (l *Lease) acquireRetrying(ctx context.Context, req AcquireRequest, st *acquireState) (ld diskfmt.Leader, done bool, err error) {
	h := l.Host
	o := acquireOpts{shared: req.Shared, ownerNowait: req.OwnerNowait, lver: req.Lver, numHosts: req.NumHosts}
	for tries := 0; ; tries++ {
		ld, err = l.paxosAcquire(ctx, o, st)
		if err == nil || !isOwnedCode(err) || !req.Shared || ld.Flags&diskfmt.LeaderShortHold == 0 {
			return ld, false, err
		}
		if tries >= h.ShRetries {
			l.sharedGiveUp(ctx, st)
			return ld, true, rescode.ErrAcquireShRetry
		}
		delay := h.backoff()
		l.log().Debug("shared acquire retry", zap.Int("try", tries+1), zap.Duration("delay", delay))
		if err := h.sleep(ctx, delay); err != nil {
			return ld, true, err
		}
	}
}

// acquireFailed undoes a failed acquire and returns its error: a shared
// acquire that lost gives up its dblock, and a ballot we may have won
// (retract) is released as a won exclusive hold r.
func (l *Lease) acquireFailed(ctx context.Context, r *Held, st *acquireState, ld diskfmt.Leader, err error) error {
	switch {
	case isOwnedCode(err):
		if r.shared {
			l.sharedGiveUp(ctx, st)
		}
		return wrap("acquire", err, &ld)
	case !st.retract:
		return wrap("acquire", err, leaderIfKnown(&ld))
	}
	// A ballot we may have won failed half way (its leader write may have
	// landed): release it as a won exclusive hold. Our dblock keeps the
	// ballot's lver, bal and value and gets RELEASED; the leader is freed
	// if it is still the one we wrote. Wiping the dblock instead
	// (sanlock's erase) lets a ballot for the same lver that missed our
	// leader commit another value: two holders (docs/paxos.md "Unknown
	// leader writes").
	l.log().Warn("acquire failed after proposing, releasing our ballot", zap.Error(err))
	r.shared = false
	r.eraseAll = true
	r.Leader = ld
	r.Dblock = st.dblock
	if l.Host.bug(BugEraseRetract) {
		r.Dblock = diskfmt.Dblock{}
	}
	r.release(ctx, "")
	return wrap("acquire", err, leaderIfKnown(&ld))
}

// finishAcquire completes a granted acquire r: a shared hold keeps our
// mode block SHARED and frees the leader; an exclusive one that saw
// SHARED mode blocks clears those of dead holders and gives up (-EAGAIN)
// while a live one is left; the LVB is read when asked for. A failure
// releases r.
func (l *Lease) finishAcquire(ctx context.Context, r *Held, req AcquireRequest, st *acquireState) error {
	h := l.Host
	switch {
	case req.Shared:
		// Keep our mode block SHARED, then free the leader.
		mb := diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: h.Generation}
		rel := r.Dblock
		rel.Flags |= diskfmt.DblockReleased
		err := l.writeHostBlock(ctx, h.ID, hostSector(&rel, &mb, st.ss), st.ss)
		if err == nil {
			err = l.paxosRelease(ctx, st.ss, &r.Leader, "")
		}
		if err != nil {
			r.undoShared, r.shared = true, false
			r.release(ctx, "")
			return wrap("acquire", err, &r.Leader)
		}
	case st.sharedCount > 0:
		live, err := l.clearDeadShared(ctx, st)
		if err != nil {
			r.release(ctx, "")
			return wrap("acquire", err, &r.Leader)
		}
		if live > 0 {
			r.release(ctx, "")
			return wrap("acquire", rescode.ErrEAGAIN, &r.Leader)
		}
	}
	if req.LVB {
		r.lvb = make([]byte, st.ss)
		if b, err := l.read(ctx, 0, st.ss, int64(diskfmt.LVBSector)*int64(st.ss)); err != nil {
			l.log().Warn("lvb read failed", zap.Error(err))
		} else {
			copy(r.lvb, b.Bytes())
			b.Release()
		}
	}
	return nil
}

// sharedGiveUp marks our dblock RELEASED after a failed shared acquire.
// Sanlock (quirk Q2) writes an all-zero dblock here, which erases the lver
// and value of our last ballot: the value of a version we may have been
// granted before, and the lver that keeps ballots for older versions from
// running (found by the simulator with late leader writes). We
// keep our last ballot's dblock of this acquire, with RELEASED set and no
// mode block, and write nothing when this acquire ran no ballot
// (docs/paxos.md "Lease versions").
func (l *Lease) sharedGiveUp(ctx context.Context, st *acquireState) {
	d := st.dblock
	if l.Host.bug(BugRepeatLver) {
		d = diskfmt.Dblock{} // sanlock's zero dblock
	} else if d == (diskfmt.Dblock{}) {
		return
	}
	d.Flags |= diskfmt.DblockReleased
	l.writeHostBlock(ctx, l.Host.ID, hostSector(&d, nil, st.ss), st.ss)
}

func leaderIfKnown(ld *diskfmt.Leader) *diskfmt.Leader {
	if ld.Magic == 0 {
		return nil
	}
	return ld
}

func (l *Lease) geometry(st *acquireState) diskfmt.Geometry {
	g, ok := diskfmt.LookupGeometry(st.ss, st.align)
	if !ok {
		g = diskfmt.Geometry{SectorSize: st.ss, AlignSize: st.align, MaxHosts: diskfmt.DefaultMaxHosts}
	}
	return g
}

// clearDeadShared checks every other host whose SHARED mode block the
// ballot saw (docs/paxos.md "Clearing dead shared holders"): a dead holder's sector is zeroed on
// every disk, a live one is counted.
func (l *Lease) clearDeadShared(ctx context.Context, st *acquireState) (int, error) {
	h := l.Host
	ids := make([]uint64, 0, len(st.shared))
	for id := range st.shared {
		if id != h.ID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	live := 0
	for _, id := range ids {
		b, err := l.read(ctx, 0, st.ss, hostOffset(id, st.ss))
		if err != nil {
			return live, ioErr(err, rescode.ErrDblockRead)
		}
		mb, _ := diskfmt.DecodeModeBlock(b.Bytes()[diskfmt.ModeBlockOffset:])
		b.Release()
		if mb.Flags&diskfmt.ModeShared == 0 || mb.Generation == 0 {
			continue
		}
		var v HostView
		ok := false
		if h.Live != nil {
			v, ok = h.Live.Host(id)
		}
		if !l.sharedHolderDead(ctx, id, mb.Generation, v, ok) {
			live++
			continue
		}
		h.log().Info("cleared shared lease for dead host_id", zap.String("resource", l.Name), zap.Uint64("host-id", id))
		if err := l.writeHostBlock(ctx, id, sectorBuf(st.ss), st.ss); err != nil {
			return live, err
		}
	}
	return live, nil
}

// ReleaseOptions modify a release.
type ReleaseOptions struct {
	// Rename, if set, becomes the leader's resource name in the release
	// leader write (SANLK_REL_RENAME; only when we rewrite the leader).
	Rename string
}

// Release releases the lease on disk (docs/paxos.md "Releasing a token" step 5): for a shared
// hold one sector write (our dblock RELEASED, mode block cleared); for an
// exclusive hold the dirty LVB, our dblock RELEASED and the leader freed
// (if we wrote it). A -202 result means the release did not finish and
// should be retried later with the same Held.
func (r *Held) Release(ctx context.Context, opt ReleaseOptions) error {
	return wrap("release", r.release(ctx, opt.Rename), nil)
}

func (r *Held) release(ctx context.Context, rename string) error {
	l := r.lease
	h := l.Host
	ss := r.Geometry.SectorSize
	rel := r.Dblock
	rel.Flags |= diskfmt.DblockReleased
	own := hostSector(&rel, nil, ss)
	switch {
	case r.eraseAll:
		errA := l.writeHostBlock(ctx, h.ID, own, ss)
		var last *diskfmt.Leader
		if r.Leader.Lver != 0 {
			last = &r.Leader
		}
		if err := l.paxosRelease(ctx, ss, last, rename); err != nil {
			return err
		}
		return errA
	case r.undoShared:
		errA := l.writeHostBlock(ctx, h.ID, own, ss)
		if err := l.paxosRelease(ctx, ss, &r.Leader, rename); err != nil {
			return err
		}
		return errA
	case r.shared:
		return l.writeHostBlock(ctx, h.ID, own, ss)
	case r.Leader.Lver == 0:
		return nil
	}
	if r.lvbDirty {
		if err := l.write(ctx, 0, r.lvbSector(), int64(diskfmt.LVBSector)*int64(ss)); err != nil {
			h.log().Warn("lvb write failed", zap.String("resource", l.Name), zap.Error(err))
		}
	}
	if err := l.writeHostBlock(ctx, h.ID, own, ss); err != nil {
		h.log().Warn("release dblock write failed", zap.String("resource", l.Name), zap.Error(err))
	}
	return l.paxosRelease(ctx, ss, &r.Leader, rename)
}

func (r *Held) lvbSector() []byte {
	b := sectorBuf(r.Geometry.SectorSize)
	copy(b, r.lvb)
	return b
}

// Convert changes the mode of the hold (docs/paxos.md "Convert"). To exclusive it runs
// a ballot whose dblock writes keep our SHARED mode block, then fails with
// -EAGAIN if another live host still holds it shared; the shared hold stays
// on any failure. To shared it frees the leader and records our SHARED mode
// block. Converting to the current mode is -EALREADY.
func (r *Held) Convert(ctx context.Context, req ConvertRequest) error {
	if req.Shared == r.shared {
		return wrap("convert", ErrEALREADY, nil)
	}
	l := r.lease.guardedBy(req.Guard)
	if req.Shared {
		return wrap("convert", r.toShared(ctx, l), nil)
	}
	return r.toExclusive(ctx, l, req.OwnerNowait)
}

// toExclusive, retractConvert and toShared issue their I/O through l: the
// hold's lease, or the guarded copy of it that the convert runs on.
func (r *Held) toExclusive(ctx context.Context, l *Lease, ownerNowait bool) error {
	h := l.Host
	st := &acquireState{ss: r.Geometry.SectorSize, align: r.Geometry.AlignSize, shared: map[uint64]bool{}}
	mb := diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: h.Generation}
	o := acquireOpts{ownerNowait: ownerNowait, carry: &mb}
	ld, err := l.paxosAcquire(ctx, o, st)
	if err != nil {
		if st.retract {
			// Our dblock now holds this ballot's value, which may have
			// been committed: later writes of our dblock (the release of
			// the shared hold) must keep it (docs/paxos.md "Unknown
			// leader writes").
			if !h.bug(BugEraseRetract) {
				r.Dblock = st.dblock
			}
			r.retractConvert(ctx, l, &ld)
		}
		return wrap("convert", err, leaderIfKnown(&ld))
	}
	r.Leader, r.Dblock = ld, st.dblock
	r.Geometry = l.geometry(st)
	ss := st.ss
	if st.sharedCount > 1 {
		live, err := l.clearDeadShared(ctx, st)
		if err != nil {
			r.retractConvert(ctx, l, &ld)
			return wrap("convert", err, &ld)
		}
		if live > 0 {
			// quirk Q8: the leader is freed, our dblock is not marked RELEASED
			if err := l.paxosRelease(ctx, ss, &r.Leader, ""); err != nil {
				h.log().Warn("convert release failed", zap.String("resource", l.Name), zap.Error(err))
			}
			return wrap("convert", rescode.ErrEAGAIN, &ld)
		}
	}
	if err := l.writeHostBlock(ctx, h.ID, hostSector(&r.Dblock, nil, ss), ss); err != nil {
		h.log().Warn("convert dblock write failed", zap.String("resource", l.Name), zap.Error(err))
	}
	r.shared = false
	return nil
}

// retractConvert frees a leader a failed SH→EX convert may have committed:
// up to three more tries on I/O timeouts, io_timeout apart; any other
// failure marks the resource for an erase-all release.
func (r *Held) retractConvert(ctx context.Context, l *Lease, ld *diskfmt.Leader) {
	h := l.Host
	var last *diskfmt.Leader
	if ld.Lver != 0 {
		last = ld
	}
	for try := 0; try <= 3; try++ {
		err := l.paxosRelease(ctx, r.Geometry.SectorSize, last, "")
		if err == nil {
			return
		}
		if !errCode(err, rescode.ErrAIOTimeout) {
			r.eraseAll = true
			return
		}
		if try < 3 && h.sleep(ctx, h.ioTimeout()) != nil {
			return
		}
	}
}

func (r *Held) toShared(ctx context.Context, l *Lease) error {
	h := l.Host
	ss := r.Geometry.SectorSize
	if r.lvbDirty {
		// the flag stays set
		if err := l.write(ctx, 0, r.lvbSector(), int64(diskfmt.LVBSector)*int64(ss)); err != nil {
			h.log().Warn("lvb write failed", zap.String("resource", l.Name), zap.Error(err))
		}
	}
	mb := diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: h.Generation}
	rel := r.Dblock
	rel.Flags |= diskfmt.DblockReleased
	if err := l.writeHostBlock(ctx, h.ID, hostSector(&rel, &mb, ss), ss); err != nil {
		return err
	}
	for try := 1; ; try++ {
		err := l.paxosRelease(ctx, ss, &r.Leader, "")
		if err == nil {
			break
		}
		if !errCode(err, rescode.ErrAIOTimeout) || try > h.IOTimeout {
			if !errCode(err, rescode.ErrAIOTimeout) {
				r.eraseAll = true
			}
			return err
		}
		if err := h.sleep(ctx, time.Duration(try)*time.Second); err != nil {
			return err
		}
	}
	r.shared = true
	return nil
}

// LVB returns a copy of the in-memory lock value block, n bytes (0 or more
// than a sector means one sector). It fails with -EINVAL when the lease
// was acquired without SANLK_ACQUIRE_LVB.
func (r *Held) LVB(n int) ([]byte, error) {
	if r.lvb == nil {
		return nil, wrap("get_lvb", rescode.ErrEINVAL, nil)
	}
	if n <= 0 || n > len(r.lvb) {
		n = len(r.lvb)
	}
	return append([]byte(nil), r.lvb[:n]...), nil
}

// SetLVB replaces the start of the in-memory lock value block with b; it is
// written to disk at the exclusive release (or EX→SH convert). No I/O.
func (r *Held) SetLVB(b []byte) error {
	switch {
	case len(b) > 4096:
		return wrap("set_lvb", ErrE2BIG, nil)
	case r.lvb == nil:
		return wrap("set_lvb", rescode.ErrEINVAL, nil)
	case len(b) > len(r.lvb):
		return wrap("set_lvb", fmt.Errorf("lvb of %d bytes: %w", len(b), ErrE2BIG), nil)
	}
	copy(r.lvb, b)
	r.lvbDirty = true
	return nil
}
