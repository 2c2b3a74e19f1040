package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

// Resource names a resource lease: a paxos lease of Lockspace stored at
// Path+Offset (written beforehand, e.g. with `sanlock client init -r` or
// client.WriteResource; docs/ondisk.md).
type Resource struct {
	// Lockspace is the lockspace of the lease ("" = the session's).
	Lockspace string
	Name      string
	Path      string
	Offset    uint64
	// Shared asks for a shared (read) lease: any number of hosts may hold
	// it shared at once, never together with an exclusive holder.
	Shared bool
}

// Lease is one resource lease as seen by this process. It is either held
// (after a successful Acquire or TryAcquire) or not. A Lease is safe for
// concurrent use, but holding is per process: two goroutines that both need
// the resource must coordinate among themselves.
type Lease struct {
	s    *Session
	res  client.Resource
	name string // "ls:res"

	mu      sync.Mutex
	held    bool
	token   uint64
	lost    chan struct{}
	lostErr error
}

// Lease returns a handle for r. It does not touch the daemon.
func (s *Session) Lease(r Resource) *Lease {
	ls := r.Lockspace
	if ls == "" {
		ls = s.Lockspace()
	}
	res := client.Resource{LockspaceName: ls, Name: r.Name,
		Disks: []client.Disk{{Path: r.Path, Offset: r.Offset}}}
	if r.Shared {
		res.Flags |= client.ResShared
	}
	l := &Lease{s: s, res: res, name: ls + ":" + r.Name, lost: make(chan struct{})}
	return l
}

// String returns "lockspace:resource".
func (l *Lease) String() string { return l.name }

// Acquire blocks until the lease is held or ctx ends. While another owner
// holds the lease, or after a lost ballot, it retries with jittered
// exponential backoff (Config.MinBackoff..MaxBackoff); every other failure
// is returned at once. When ctx ends first the error matches both
// ctx.Err() and, if there was one, the last attempt's error (ErrLocked,
// as a *LockedError naming the holder). Config.OnRetry, when set, is
// called before each wait.
//
// An owner whose host died is waited for without holding the daemon: each
// attempt asks the daemon not to wait (OWNER_NOWAIT) and fails while the
// dead host's lease has not timed out (host_dead_seconds, 8*io_timeout+60;
// docs/timing.md); then the next attempt takes the lease over.
func (l *Lease) Acquire(ctx context.Context) error {
	var last error
	var holder *LockedError // who held it, for OnRetry
	start := time.Now()
	for n := 0; ; n++ {
		err := l.acquireOnce(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return l.waitErr(ctx.Err(), last)
		}
		if !retryable(err) {
			return err
		}
		last = err
		wait := l.s.backoff(n)
		if f := l.s.cfg.OnRetry; f != nil {
			// Who holds it is looked up when the daemon's answer
			// changes, not on every attempt (the lookup costs daemon
			// commands).
			if holder == nil || client.ErrorCode(err) != client.ErrorCode(holder.Err) {
				holder, _ = l.locked(ctx, err).(*LockedError)
			} else {
				h := *holder
				h.Err = errors.Unwrap(err)
				holder = &h
			}
			if holder != nil {
				last = holder
			}
			f(Retry{Lease: l.name, Attempt: n + 1, Err: last, Elapsed: time.Since(start), Wait: wait})
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return l.waitErr(err, last)
		}
	}
}

// Retry describes a failed attempt of a blocking Acquire that is about to
// be retried (Config.OnRetry).
type Retry struct {
	Lease   string        // "lockspace:resource"
	Attempt int           // 1 for the first attempt
	Err     error         // the attempt's error: ErrLocked, usually a *LockedError naming the holder
	Elapsed time.Duration // since Acquire was called
	Wait    time.Duration // until the next attempt
}

// waitErr is the error of an Acquire whose context ended; last is the
// last attempt's error, completed with who holds the lease.
func (l *Lease) waitErr(ctxErr, last error) error {
	if last != nil {
		var le *LockedError
		if !errors.As(last, &le) {
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			last = l.locked(lctx, last)
			cancel()
		}
	}
	return &waitError{subject: subject("acquire", l.name, l.path(), l.offset()), ctx: ctxErr, last: last}
}

// TryAcquire makes one attempt. When the lease is held by someone else it
// returns a *LockedError (errors.Is(err, ErrLocked)) naming the holder:
// the process when it is on this host, else the owner host when the
// daemon knows it.
func (l *Lease) TryAcquire(ctx context.Context) error {
	err := l.acquireOnce(ctx)
	if err == nil || !retryable(err) {
		return err
	}
	return l.locked(ctx, err)
}

// locked turns an ErrLocked attempt error into a *LockedError that names
// the holder as far as it can be found out.
func (l *Lease) locked(ctx context.Context, err error) error {
	le := &LockedError{Name: l.name, Path: l.path(), Offset: l.offset(), Err: errors.Unwrap(err)}
	if le.Err == nil {
		le.Err = err
	}
	if client.ErrorCode(err) == client.RvEEXIST {
		// The daemon refuses a second holder on this host before
		// looking at storage: the holder is a local process.
		le.Pid = l.s.localHolder(ctx, l.res.LockspaceName, l.res.Name)
	}
	l.fillOwner(ctx, le)
	return le
}

func (l *Lease) path() string   { return l.res.Disks[0].Path }
func (l *Lease) offset() uint64 { return l.res.Disks[0].Offset }

// fillOwner reads the lease's current owner from storage (through the
// daemon) and the owner's host name from the lockspace.
func (l *Lease) fillOwner(ctx context.Context, le *LockedError) {
	res := client.Resource{LockspaceName: l.res.LockspaceName, Name: l.res.Name, Disks: l.res.Disks}
	r, hosts, err := l.s.cl.ReadResourceOwners(ctx, &res)
	if err != nil || r == nil {
		return
	}
	if len(hosts) == 1 {
		le.OwnerHostID, le.OwnerGeneration = hosts[0].HostID, hosts[0].Generation
	}
	if le.OwnerHostID != 0 && le.Pid == 0 {
		le.OwnerName = l.s.hostName(ctx, l.res.LockspaceName, le.OwnerHostID)
		le.OwnerState = l.s.hostState(ctx, l.res.LockspaceName, le.OwnerHostID)
	}
}

func (l *Lease) acquireOnce(ctx context.Context) error {
	s := l.s
	s.mu.Lock()
	if s.closed || s.err != nil {
		err := s.err
		s.mu.Unlock()
		if err == nil {
			err = ErrSessionClosed
		}
		return l.err("acquire", ErrSessionClosed, err)
	}
	s.mu.Unlock()
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	if held {
		return l.err("acquire", ErrAlreadyHeld, errors.New("this Lease holds it already"))
	}
	res := l.res
	if err := s.reg.Acquire(ctx, []client.Resource{res}, client.AcquireNoWait, nil); err != nil {
		return l.wrap("acquire", err)
	}
	tok, err := l.readToken(ctx)
	if err != nil {
		// Held, but we cannot say at which version: give it back rather
		// than hand out a lease without a token.
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = s.reg.Release(rctx, []client.Resource{l.names()}, 0)
		cancel()
		return l.wrap("acquire", err)
	}
	l.mu.Lock()
	l.held, l.token, l.lostErr = true, tok, nil
	l.lost = make(chan struct{})
	l.mu.Unlock()
	s.mu.Lock()
	s.leases[l] = struct{}{}
	s.mu.Unlock()
	return nil
}

// err is an *Error of an operation on l.
func (l *Lease) err(op string, kind, err error) error {
	return &Error{Op: op, Name: l.name, Path: l.path(), Offset: l.offset(), Kind: kind, Err: err}
}

// wrap is wrap for an operation on l: the error names the lease's file.
func (l *Lease) wrap(op string, err error) error {
	err = l.s.wrap(op, l.name, err)
	var e *Error
	if errors.As(err, &e) && e.Path == "" {
		e.Path, e.Offset = l.path(), l.offset()
	}
	return err
}

// names is the resource without disks, as RELEASE wants it.
func (l *Lease) names() client.Resource {
	return client.Resource{LockspaceName: l.res.LockspaceName, Name: l.res.Name, Disks: l.res.Disks}
}

// readToken returns the version at which the lease is now held: from
// INQUIRE for an exclusive lease (the daemon reports the lver it holds),
// from the leader on storage for a shared one (INQUIRE prints "SH").
func (l *Lease) readToken(ctx context.Context) (uint64, error) {
	if l.res.Flags&client.ResShared == 0 {
		inq, err := l.s.reg.Inquire(ctx)
		if err != nil {
			return 0, err
		}
		held, err := inq.Resources()
		if err != nil {
			return 0, err
		}
		for _, r := range held {
			if r.LockspaceName == l.res.LockspaceName && r.Name == l.res.Name {
				if r.Flags&client.ResLVer != 0 {
					return r.LVer, nil
				}
			}
		}
	}
	res := l.names()
	r, err := l.s.cl.ReadResource(ctx, &res)
	if err != nil {
		return 0, err
	}
	return r.LVer, nil
}

// Release gives the lease back. Releasing a lost lease is not an error
// (there is nothing left to give back).
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	held, lost := l.held, l.lostErr != nil
	l.mu.Unlock()
	if !held {
		if lost {
			return nil
		}
		return l.err("release", ErrNotHeld, errors.New("not held by this Lease"))
	}
	_, err := l.s.reg.Release(ctx, []client.Resource{l.names()}, 0)
	if err != nil && ctx.Err() != nil {
		return err
	}
	l.forget()
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return l.wrap("release", err)
	}
	return nil
}

// forget marks the lease not held.
func (l *Lease) forget() {
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	l.s.mu.Lock()
	delete(l.s.leases, l)
	l.s.mu.Unlock()
}

// Token returns the fencing token of the current holding: the lease
// version (lver) at which it was acquired. Exclusive acquisitions of a
// resource get increasing tokens, so a service that remembers the largest
// token it has seen and refuses any token not above it is protected from a
// holder that lost the lease but does not know yet (paused, partitioned).
// The tokens one daemon is granted strictly increase even when a late
// leader write rolls the lease back; across hosts that holds unless a host
// restarted or a sanlock 3.8.5 host takes part (docs/paxos.md "Lease
// versions" says exactly when). It is 0 when the lease is not held.
func (l *Lease) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return 0
	}
	return l.token
}

// Held reports whether the lease is held and not lost.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && l.lostErr == nil
}

// Lost returns a channel that is closed when the current holding is lost:
// stop using what the lease protects at once. Err then says why. The
// channel of a holding that was released normally is never closed; a new
// acquisition gets a new channel.
//
// The notice comes from the daemon before it would escalate to SIGKILL (a
// failing lockspace: at 8*io_timeout after the last renewal, SIGKILL at
// 8*io_timeout+kill_grace_seconds; docs/timing.md), from the session's own
// checks (every PollInterval), or from the registered connection closing.
// A FORCE request from another host SIGKILLs the holder with no notice.
func (l *Lease) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Err returns nil while the lease is held or was released normally, and a
// *LostError (errors.Is(err, ErrLost)) once it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// markLost closes Lost with reason r; release asks the daemon to drop the
// lease too (unless Config.KeepLostLeases).
func (l *Lease) markLost(r Reason, release bool) { l.markLostBy(r, 0, release) }

// markLostBy is markLost with the host that requested the lease (0 when
// not known or not a request).
func (l *Lease) markLostBy(r Reason, by uint64, release bool) {
	l.mu.Lock()
	if !l.held || l.lostErr != nil {
		l.mu.Unlock()
		return
	}
	l.lostErr = &LostError{Name: l.name, Token: l.token, Reason: r, RequestedBy: by}
	close(l.lost)
	l.mu.Unlock()
	if !release || l.s.cfg.KeepLostLeases {
		if !release {
			l.forget()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = l.s.reg.Release(ctx, []client.Resource{l.names()}, 0)
	l.forget()
}

// requested reports whether the lease's request record asks for a version
// newer than the one held (another host wants it; docs/ondisk.md "Request
// record"). err is set when the record could not be read.
func (l *Lease) requested() (bool, error) {
	l.mu.Lock()
	tok := l.token
	l.mu.Unlock()
	d := l.res.Disks[0]
	f, err := diskio.OpenFile(d.Path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	buf := make([]byte, 2*diskfmt.SectorSize4K) // leader and request record, either sector size
	if err := f.ReadAt(ctx, buf, int64(d.Offset)); err != nil {
		return false, err
	}
	ld, err := diskfmt.DecodeLeader(buf)
	if err != nil {
		return false, err
	}
	ss := int(ld.SectorSize)
	if ss != diskfmt.SectorSize512 && ss != diskfmt.SectorSize4K {
		return false, fmt.Errorf("lease: %s: sector size %d in leader", l.name, ss)
	}
	rq, err := diskfmt.DecodeRequest(buf[ss : ss+diskfmt.RequestSize])
	if err != nil {
		return false, err
	}
	return rq.Lver > tok, nil
}

// requester returns the host_id of another host whose delta lease in
// lockspace ls carries this host's bit (docs/ondisk.md "Lockspace (delta
// leases)"): a host that made a REQUEST sets it for a few seconds so that
// the holder's host looks at its leases. It returns 0 when no other
// host's lease carries it (the request came from this host) or the
// lockspace cannot be read. It reads the sectors of the hosts the daemon
// has seen (GET_HOSTS, which the daemons do not log).
func (s *Session) requester(ctx context.Context, ls string) uint64 {
	lss, err := s.cl.GetLockspaces(ctx)
	if err != nil {
		return 0
	}
	var disk client.Disk
	var our uint64
	for _, l := range lss {
		if l.Name == ls && l.Flags&client.LSFAdd == 0 {
			disk, our = l.Disk, l.HostID
			break
		}
	}
	if our == 0 {
		return 0
	}
	hosts, err := s.cl.GetHosts(ctx, ls, 0)
	if err != nil {
		return 0
	}
	f, err := diskio.OpenFile(disk.Path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sector := make([]byte, diskfmt.SectorSize4K)
	ss := 0
	for _, h := range hosts {
		if h.HostID == our || h.HostID == 0 || h.HostID > diskfmt.BitmapSize*8 {
			continue
		}
		if ss == 0 {
			// The sector size, from the first sector's leader.
			if err := f.ReadAt(ctx, sector, int64(disk.Offset)); err != nil {
				return 0
			}
			ld, err := diskfmt.DecodeLeader(sector)
			if err != nil {
				return 0
			}
			ss = int(ld.SectorSize)
			if ss != diskfmt.SectorSize512 && ss != diskfmt.SectorSize4K {
				return 0
			}
		}
		off := int64(disk.Offset) + diskfmt.DeltaSectorOffset(h.HostID, ss)
		if err := f.ReadAt(ctx, sector[:ss], off); err != nil {
			continue
		}
		if diskfmt.BitmapTest(sector[:ss], our) {
			return h.HostID
		}
	}
	return 0
}

// Mutex is an exclusive lease with sync.Locker-like names.
type Mutex struct{ *Lease }

// Mutex returns an exclusive lease on the named resource of the session's
// lockspace.
func (s *Session) Mutex(name, path string, offset uint64) *Mutex {
	return &Mutex{s.Lease(Resource{Name: name, Path: path, Offset: offset})}
}

// Lock is Acquire.
func (m *Mutex) Lock(ctx context.Context) error { return m.Acquire(ctx) }

// TryLock is TryAcquire.
func (m *Mutex) TryLock(ctx context.Context) error { return m.TryAcquire(ctx) }

// Unlock is Release.
func (m *Mutex) Unlock(ctx context.Context) error { return m.Release(ctx) }
