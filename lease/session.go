package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// Lockspace names a lockspace lease for Session to join: this host's
// host_id in the lockspace stored at Path+Offset.
type Lockspace struct {
	Name   string
	HostID uint64 // 1..2000, unique per host
	Path   string
	Offset uint64
	// IOTimeout is the io_timeout in seconds (0 = the daemon's default,
	// 10). It sets every lease timing (docs/timing.md): a host that stops
	// renewing is considered dead after 8*IOTimeout+60 seconds.
	IOTimeout uint32
}

// Config configures a Session. The zero value registers with the daemon of
// $SANLOCK_RUN_DIR (or /run/sanlock) and joins nothing.
type Config struct {
	// RunDir is the daemon's run directory ("" = client.RunDir()).
	RunDir string
	// Lockspace, when set, is joined by NewSession (which waits until the
	// join completes) and watched: Done is closed when it fails or is
	// removed. Leases default to this lockspace.
	Lockspace *Lockspace
	// LeaveOnClose removes the lockspace on Close when this session joined
	// it (a lockspace that was already joined is never removed).
	LeaveOnClose bool
	// KeepLostLeases stops the session from releasing a lost lease itself.
	// By default a lost lease is released right after Lost() is closed, so
	// the daemon has nothing left to escalate against and the process keeps
	// running; with KeepLostLeases the holder must call Release (or exit)
	// before the daemon's grace period ends, or it is SIGKILLed.
	KeepLostLeases bool
	// PollInterval is how often the session checks its lockspaces between
	// notices (default 1 s). The check is a GET_LOCKSPACES, a command the
	// daemons do not log; STATUS is asked only when a lockspace in use is
	// no longer listed as joined, or on a notice.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// Acquire attempts (defaults 50 ms and 2 s).
	MinBackoff, MaxBackoff time.Duration
	// OnRetry, when set, is called by a blocking Acquire after each
	// attempt that found the lease held, before it waits Retry.Wait: to
	// show progress ("held by host 2, retrying") or to log. It runs on the
	// Acquire's goroutine and should return quickly.
	OnRetry func(Retry)
}

// Session is this process's registration with the local lease daemon. All
// leases acquired through a session are held by this process; the daemon
// releases them when the session is closed or the process exits.
//
// A Session is safe for concurrent use. Operations on the registered
// connection are serialised (the daemon handles one at a time per process).
type Session struct {
	cfg Config
	cl  *client.Client
	reg *client.Reg
	ls  *client.Lockspace // joined lockspace, nil if none
	// joined is true when this session added the lockspace.
	joined bool

	notices *notifier

	mu     sync.Mutex
	leases map[*Lease]struct{}
	closed bool
	done   chan struct{}
	err    error
	stop   chan struct{}
	wg     sync.WaitGroup
	rnd    *rand.Rand
}

// NewSession registers this process with the daemon and, when cfg.Lockspace
// is set, joins that lockspace and waits until the join completes (a first
// join takes about 2*io_timeout+1 seconds, longer if the host_id was used
// recently; docs/timing.md). ctx bounds the whole setup; a join cut short by
// ctx is undone.
func NewSession(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 2 * time.Second
		if cfg.MaxBackoff < cfg.MinBackoff {
			cfg.MaxBackoff = cfg.MinBackoff
		}
	}
	cl, err := client.Dial(cfg.RunDir)
	if err != nil {
		return nil, err
	}
	s := &Session{
		cfg:    cfg,
		cl:     cl,
		leases: make(map[*Lease]struct{}),
		done:   make(chan struct{}),
		stop:   make(chan struct{}),
		rnd:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	reg, err := cl.Register(ctx)
	if err != nil {
		return nil, s.wrap("register", "", err)
	}
	s.reg = reg
	if s.notices, err = newNotifier(); err != nil {
		reg.Close()
		return nil, err
	}
	// The kill program runs instead of SIGTERM and is copied into each
	// lease at acquire, so it must be set before the first acquire.
	if err := reg.Killpath(ctx, s.notices.program, s.notices.args, 0); err != nil {
		s.notices.close()
		reg.Close()
		return nil, s.wrap("killpath", "", err)
	}
	if cfg.Lockspace != nil {
		if err := s.join(ctx, cfg.Lockspace); err != nil {
			s.notices.close()
			reg.Close()
			return nil, err
		}
	}
	s.wg.Add(2)
	go s.watch()
	go s.watchConn()
	return s, nil
}

func (s *Session) join(ctx context.Context, l *Lockspace) error {
	ls := &client.Lockspace{Name: l.Name, HostID: l.HostID,
		Disk: client.Disk{Path: l.Path, Offset: l.Offset}}
	err := s.cl.AddLockspace(ctx, ls, 0, l.IOTimeout)
	switch {
	case err == nil:
		s.joined = true
	case errors.Is(err, client.ErrExists):
		// Already joined (by another process of this host): share it,
		// but wait if it is still being added.
		for {
			ierr := s.cl.InqLockspace(ctx, ls, 0)
			if ierr == nil {
				break
			}
			if !errors.Is(ierr, client.ErrInProgress) {
				return s.joinErr(l, ierr)
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	case ctx.Err() != nil:
		// The daemon keeps joining after we stopped waiting: undo.
		_ = s.cl.RemLockspace(context.Background(), ls, client.RemAsync)
		return fmt.Errorf("lease: %s: %w", subject("join", l.Name, l.Path, l.Offset), ctx.Err())
	default:
		return s.joinErr(l, err)
	}
	s.ls = ls
	return nil
}

// joinErr is the error of a failed join of l.
func (s *Session) joinErr(l *Lockspace, err error) error {
	err = s.wrap("join", l.Name, err)
	var e *Error
	if errors.As(err, &e) && e.Path == "" {
		e.Path, e.Offset = l.Path, l.Offset
	}
	return err
}

// wrap is wrap with the daemon's socket named when it could not be
// reached.
func (s *Session) wrap(op, name string, err error) error {
	err = wrap(op, name, err)
	var e *Error
	if errors.As(err, &e) && e.Socket == "" && unreachable(s.cl, e.Err) {
		e.Kind, e.Socket = ErrDaemonUnavailable, s.cl.SockPath
	}
	return err
}

// Done is closed when the session can no longer hold leases: its lockspace
// failed or was removed, the daemon went away, or Close was called. Err
// then says which.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session is usable, then why it ended: a
// *LostError (matching ErrLost, with ReasonLockspaceFailed,
// ReasonLockspaceRemoved or ReasonDaemonGone) or ErrSessionClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Client returns the protocol client of the session's daemon, for what this
// package does not cover.
func (s *Session) Client() *client.Client { return s.cl }

// Lockspace returns the name of the joined lockspace ("" if none).
func (s *Session) Lockspace() string {
	if s.ls == nil {
		return ""
	}
	return s.ls.Name
}

// end closes Done with err (first call wins).
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.done)
}

// Close releases every lease of the session (the daemon does this when the
// registered connection closes), stops watching, and leaves the lockspace
// if Config.LeaveOnClose is set and this session joined it.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	held := s.heldLocked()
	s.mu.Unlock()
	for _, l := range held {
		l.markLost(ReasonSessionClosed, false)
	}
	// The watchers end first, so that no exchange of theirs (a release
	// after a notice) is cut off: the connection then closes between two
	// commands, which the daemon sees as a plain end of the client.
	// A watcher stuck on a daemon that does not answer is cut off after
	// a while by closing the connection under it.
	close(s.stop)
	waited := make(chan struct{})
	go func() { s.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(closeWait):
	}
	err := s.reg.Close()
	<-waited
	s.notices.close()
	s.end(ErrSessionClosed)
	if s.cfg.LeaveOnClose && s.joined && s.ls != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if rerr := s.cl.RemLockspace(ctx, s.ls, 0); rerr != nil && err == nil {
			err = s.wrap("leave", s.ls.Name, rerr)
		}
	}
	return err
}

// closeWait bounds how long Close waits for the watchers' exchanges
// before it closes the registered connection under them.
const closeWait = 5 * time.Second

func (s *Session) heldLocked() []*Lease {
	out := make([]*Lease, 0, len(s.leases))
	for l := range s.leases {
		out = append(out, l)
	}
	return out
}

func (s *Session) held() []*Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldLocked()
}

// backoff returns the n-th wait (n >= 0): exponential from MinBackoff,
// capped at MaxBackoff, with "full jitter" (uniform in [d/2, d]).
func (s *Session) backoff(n int) time.Duration {
	d := s.cfg.MinBackoff
	for i := 0; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	if d > s.cfg.MaxBackoff {
		d = s.cfg.MaxBackoff
	}
	s.mu.Lock()
	j := time.Duration(s.rnd.Int64N(int64(d/2) + 1))
	s.mu.Unlock()
	return d/2 + j
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lsState is what STATUS says about one lockspace.
type lsState struct {
	present   bool
	list      string // spaces, add, rem
	spaceDead bool
	renewFail bool
}

// lockspaceStates reads the LOCKSPACE records of STATUS (docs/protocol.md
// "State records"). A lockspace on several lists keeps its first record:
// joined ones come first.
func (s *Session) lockspaceStates(ctx context.Context) (map[string]lsState, error) {
	recs, err := s.cl.Status(ctx, client.StateLockspace)
	if err != nil {
		return nil, err
	}
	out := make(map[string]lsState)
	for _, r := range recs {
		if r.Type != client.StateLockspace {
			continue
		}
		if _, ok := out[r.Name]; ok {
			continue
		}
		st := lsState{present: true}
		for _, kv := range strings.Fields(r.Text) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "list":
				st.list = v
			case "space_dead":
				st.spaceDead = v != "0"
			case "renew_fail":
				st.renewFail = v != "0"
			}
		}
		out[r.Name] = st
	}
	return out, nil
}

// lostReason returns why a lockspace in state st can no longer hold
// leases, or 0 when it is healthy.
func (st lsState) lostReason() Reason {
	switch {
	case !st.present:
		return ReasonLockspaceRemoved
	case st.renewFail:
		return ReasonLockspaceFailed
	case st.spaceDead || st.list == "rem":
		return ReasonLockspaceRemoved
	}
	return 0
}

// allJoined reports whether every lockspace the session uses (its own
// while the session lasts, those of its held leases not yet lost) is in lss
// as joined (neither being added nor removed).
func (s *Session) allJoined(lss []client.Lockspace) bool {
	joined := make(map[string]bool, len(lss))
	for _, ls := range lss {
		if ls.Flags&(client.LSFAdd|client.LSFRem) == 0 {
			joined[ls.Name] = true
		}
	}
	if s.ls != nil && !joined[s.ls.Name] && s.Err() == nil {
		return false
	}
	for _, l := range s.held() {
		if !joined[l.res.LockspaceName] && l.Err() == nil {
			return false
		}
	}
	return true
}

// localHolder returns the pid of the process of this host that holds
// resource name of lockspace ls, from the RESOURCE records of STATUS (0
// when none is found).
func (s *Session) localHolder(ctx context.Context, ls, name string) int {
	recs, err := s.cl.Status(ctx, client.StateResource)
	if err != nil {
		return 0
	}
	for _, r := range recs {
		if r.Type == client.StateResource && r.Resource != nil &&
			r.Resource.LockspaceName == ls && r.Resource.Name == name {
			return int(int32(r.Data32))
		}
	}
	return 0
}

// watch is the session's monitor: on every kill-program notice and every
// PollInterval it checks the lockspaces in use.
func (s *Session) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		notice := false
		select {
		case <-s.stop:
			return
		case <-s.notices.c:
			notice = true
		case <-t.C:
		}
		s.check(notice)
	}
}

// check looks at the lockspaces of the session and of its held leases.
// notice says the daemon ran our kill program: something must be given
// up; when no lockspace explains it, it was a request for a lease.
func (s *Session) check(notice bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !notice || len(s.held()) == 0 {
		// Between notices (and on a repeated notice once nothing is
		// held), a look that the daemons do not log; the details
		// (STATUS, logged) only when something changed.
		lss, err := s.cl.GetLockspaces(ctx)
		if err != nil || s.allJoined(lss) {
			return
		}
	}
	states, err := s.lockspaceStates(ctx)
	if err != nil {
		return // the connection watcher reports a dead daemon
	}
	if s.ls != nil {
		if r := states[s.ls.Name].lostReason(); r != 0 {
			s.end(&LostError{Name: s.ls.Name, Reason: r})
		}
	}
	explained := false
	for _, l := range s.held() {
		if r := states[l.res.LockspaceName].lostReason(); r != 0 {
			l.markLost(r, true)
			explained = true
		}
	}
	if !notice || explained {
		return
	}
	// A request: find the lease(s) whose request record asks for a newer
	// version than ours (docs/ondisk.md "Request record"). A lease whose
	// record cannot be read counts as requested (we cannot rule it out);
	// a notice that matches no lease is a repeat for a lease already given
	// back (the daemon may run the kill program again while the request
	// is still pending) and is ignored.
	by := make(map[string]uint64)
	for _, l := range s.held() {
		if ok, err := l.requested(); ok || err != nil {
			ls := l.res.LockspaceName
			if _, known := by[ls]; !known {
				by[ls] = s.requester(ctx, ls)
			}
			l.markLostBy(ReasonRequested, by[ls], true)
		}
	}
}

// watchConn notices the daemon closing the registered connection.
func (s *Session) watchConn() {
	defer s.wg.Done()
	if !waitHangup(s.reg.Conn(), s.stop) {
		return
	}
	for _, l := range s.held() {
		l.markLost(ReasonDaemonGone, false)
	}
	s.end(&LostError{Name: s.Lockspace(), Reason: ReasonDaemonGone})
}

// hostState returns the state of hostID in lockspace ls as the daemon
// sees it (GET_HOSTS): "live", "fail", "dead", "free", "unknown", or ""
// when the daemon does not say.
func (s *Session) hostState(ctx context.Context, ls string, hostID uint64) string {
	hosts, err := s.cl.GetHosts(ctx, ls, hostID)
	if err != nil {
		return ""
	}
	for _, h := range hosts {
		if h.HostID != hostID {
			continue
		}
		switch h.State() {
		case client.HostLive:
			return "live"
		case client.HostFail:
			return "fail"
		case client.HostDead:
			return "dead"
		case client.HostFree:
			return "free"
		case client.HostUnknown:
			return "unknown"
		}
	}
	return ""
}

// hostName returns the name of hostID in lockspace ls from HOST_STATUS
// ("" when unknown).
func (s *Session) hostName(ctx context.Context, ls string, hostID uint64) string {
	recs, err := s.cl.HostStatus(ctx, ls)
	if err != nil {
		return ""
	}
	for _, r := range recs {
		if uint64(r.Data32) != hostID {
			continue
		}
		for _, kv := range strings.Fields(r.Text) {
			if v, ok := strings.CutPrefix(kv, "owner_name="); ok {
				return v
			}
		}
	}
	return ""
}
