package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

// LockspacesConfig holds what the lockspace manager takes from outside.
// Zero values select the production choices.
type LockspacesConfig struct {
	// Clock is the monotonic clock of every lockspace (nil:
	// delta.NewSystemClock(), i.e. CLOCK_MONOTONIC).
	Clock delta.Clock
	// Open opens a lockspace path (nil: diskfmt.OpenFile, O_DIRECT|O_SYNC).
	// Any error makes add_lockspace fail with -ENODEV.
	Open func(path string) (diskfmt.Device, error)
	// Kill sends a signal to a lease holder (nil: kill(2)).
	Kill func(pid int, sig syscall.Signal) error
	// RunKillpath starts a holder's kill program (nil: the resource
	// manager's, else fork/exec).
	RunKillpath func(argv []string) error
	// OpenWatchdog connects one lockspace to the watchdog multiplexer when
	// the daemon uses the watchdog (nil: wdmd over its socket, Config
	// WdmdSocket or /run/wdmd/wdmd.sock).
	OpenWatchdog func(space string, hostID uint64) (WatchdogSession, error)
	// CheckInterval is the main-loop pass of each lockspace (0: 1 s); while
	// holders are being killed passes come every CheckInterval/5.
	CheckInterval time.Duration
	// PollInterval is how often a synchronous rem_lockspace and an
	// INQ_WAIT inq_lockspace look again (0: 1 s, as sanlock).
	PollInterval time.Duration
	// Examine, when set, is asked to examine the resources held in a
	// lockspace: after another host set our bit (request notification),
	// and for EXAMINE_LOCKSPACE. It must not block.
	Examine func(space string)
}

// WatchdogSession is one lockspace's use of the watchdog (docs/wdmd.md "sanlock side"):
// Activate after the host_id lease is acquired (expiry L + 8*io_timeout),
// Renewed after each renewal, Deactivate once no process uses the
// lockspace any more, Close at the end. wdmdclient.Session is the
// production one.
type WatchdogSession interface {
	Activate(renewal, expire uint64) error
	Renewed(ts, expire uint64) error
	Deactivate() error
	Close() error
}

// LockspaceUsage is implemented by a ResourceManager that holds leases in
// lockspaces. The lockspace manager uses it for REM_UNUSED, for the "all
// holders gone" rule of a dying lockspace (docs/delta.md "All holders gone") and to kill the
// holders (docs/delta.md "Signalling holders"). Without it no lockspace ever has holders.
type LockspaceUsage interface {
	// SpaceResources counts the resources of lockspace space in any state
	// (held, being acquired or released, orphan), and the orphans alone.
	SpaceResources(space string) (all, orphans int)
	// SpaceHolders lists the pids of the registered clients that hold a
	// token in space.
	SpaceHolders(space string) []int
	// SpaceDead tells that space is dying: its tokens must from now on be
	// freed without disk I/O.
	SpaceDead(space string)
}

// list is the registry list a lockspace is on (docs/delta.md "Lockspace lists").
type list int

const (
	listAdd list = iota
	listSpaces
	listRem
)

func (l list) String() string {
	switch l {
	case listAdd:
		return "add"
	case listSpaces:
		return "spaces"
	}
	return "rem"
}

// maxEventListeners is the number of REG_EVENT slots per lockspace.
const maxEventListeners = 32

// killCountMax is the most signals sent to one holder.
const killCountMax = 100

// Lockspaces is the LockspaceManager of the daemon: one delta.Lockspace
// runner per joined lockspace, on the add/spaces/rem lists of sanlock
// (docs/delta.md "Lifecycle"). Each lockspace has its own goroutines, one renewing (all
// its disk I/O) and one doing the main-loop checks, so a slow or hung
// disk only ever delays its own lockspace. The registry mutex is never
// held across disk I/O or socket writes.
//
// It plugs into a Server through Deps.Lockspaces; New then registers the
// lockspace commands that the core does not handle (GET_HOSTS, RENEWAL,
// WRITE/READ_LOCKSPACE, SET_EVENT, REG/END_EVENT, SET_CONFIG,
// EXAMINE_LOCKSPACE).
type Lockspaces struct {
	cfg LockspacesConfig
	srv *Server

	wg sync.WaitGroup // every lockspace goroutine

	mu      sync.Mutex
	lastID  uint32
	lists   [3][]*space // index list; newest first
	forced  bool        // forced shutdown in progress
	stopped bool
}

var _ LockspaceManager = (*Lockspaces)(nil)

// NewLockspaces returns an empty manager.
func NewLockspaces(cfg LockspacesConfig) *Lockspaces {
	if cfg.Clock == nil {
		cfg.Clock = delta.NewSystemClock()
	}
	if cfg.Open == nil {
		cfg.Open = func(p string) (diskfmt.Device, error) { return diskfmt.OpenFile(p) }
	}
	if cfg.Kill == nil {
		cfg.Kill = func(pid int, sig syscall.Signal) error { return unix.Kill(pid, sig) }
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	return &Lockspaces{cfg: cfg}
}

// attach is called by New: it binds the manager to its server (host name,
// settings, logger, clients) and registers the lockspace commands.
func (m *Lockspaces) attach(s *Server) {
	m.srv = s
	m.cfg.Open = s.guardOpen(m.cfg.Open) // descriptor reserve, EMFILE line (nofile.go)
	m.registerHandlers(s)
}

// wait stops every lockspace (without waiting for holders) and waits for
// their goroutines; called by Server.Stop after its context was cancelled.
func (m *Lockspaces) wait() {
	m.mu.Lock()
	m.stopped = true
	for _, l := range m.lists {
		for _, sp := range l {
			sp.cancel()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Lockspaces) lg() *zap.Logger {
	if m.srv == nil {
		return zap.NewNop()
	}
	return m.srv.Logger()
}

func (m *Lockspaces) conf() *Config {
	if m.srv == nil {
		return DefaultConfig()
	}
	return &m.srv.cfg
}

func (m *Lockspaces) baseContext() context.Context {
	if m.srv == nil {
		return context.Background()
	}
	return m.srv.ctx
}

func (m *Lockspaces) hostName() string {
	if m.srv == nil {
		return ""
	}
	return m.srv.HostName()
}

// examine asks the resource layer to examine the resources held in space:
// LockspacesConfig.Examine, else a ResourceManager with an Examine method.
func (m *Lockspaces) examine(space string) {
	if m.cfg.Examine != nil {
		m.cfg.Examine(space)
		return
	}
	if m.srv != nil {
		if ex, ok := m.srv.deps.Resources.(interface{ Examine(string) }); ok {
			ex.Examine(space)
		}
	}
}

func (m *Lockspaces) usage() LockspaceUsage {
	if m.srv == nil {
		return nil
	}
	u, _ := m.srv.deps.Resources.(LockspaceUsage)
	return u
}

// space is one lockspace entry (sanlock's struct space).
type space struct {
	m         *Lockspaces
	id        uint32
	ls        client.Lockspace // identity: name, host_id, path, offset
	ioTimeout int

	ctx    context.Context // the runner's; cancelled to stop or abort it
	cancel context.CancelFunc

	addDone   chan struct{} // closed when the add has its outcome
	addResult int32
	addCause  string        // what failed when addResult != 0, for the log
	gone      chan struct{} // closed when the entry has been freed

	// Under m.mu.
	list          list
	run           *delta.Lockspace // nil until the device is open
	paxos         *paxos.Host      // built by PaxosHost on first use
	wd            WatchdogSession  // nil with -w 0
	wdActive      bool             // activated and not yet deactivated
	removeReq     bool
	spaceDead     bool
	killingPids   int
	usedRetries   uint32
	externalUsed  bool
	usedByOrphans bool
	kills         map[int]*killState
	listeners     []*Conn
}

type killState struct {
	count       int
	last        time.Duration
	ranKillpath bool
}

func (sp *space) logf(format string, args ...any) {
	sp.m.lg().Info(fmt.Sprintf("s%d ", sp.id) + fmt.Sprintf(format, args...))
}

// disk is the lockspace's "path:offset" for log lines.
func (sp *space) disk() string { return diskLog(sp.ls.Disk.Path, sp.ls.Disk.Offset) }

// addCauseText is what made the add fail, for the add_lockspace fail line.
func (sp *space) addCauseText() string {
	if sp.addCause != "" {
		return sp.addCause
	}
	return "disk " + sp.disk()
}

// deltaErrorLines are the prefixes of the delta package's error and warning
// lines; deltaLogf appends the lockspace name and disk to them, which the
// delta package does not know (it has a Device, not a path).
var deltaErrorLines = []string{
	"add_lockspace fail", "release after failed join", "delta_release not done",
	"delta_release given up", "renewal error", "renewed ", "check_our_lease",
	"delta_renew not owner", "delta_renew io_timeout changed", "delta_renew timestamp too small",
	"delta_renew write time", "delta_renew long write", "delta_acquire host_id", "delta_acquire abort",
	"event ",
}

// deltaLogf is the Logf of the delta runner: sp.logf, plus "(lockspace NAME
// disk PATH:OFFSET)" at the end of error lines.
func (sp *space) deltaLogf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	for _, p := range deltaErrorLines {
		if strings.HasPrefix(line, p) && (p != "renewed " || strings.Contains(line, "too long")) &&
			(p != "delta_renew write time" || strings.Contains(line, "error")) {
			line += fmt.Sprintf(" (lockspace %s disk %s)", sp.ls.Name, sp.disk())
			break
		}
	}
	sp.logf("%s", line)
}

// sameDisk compares the disk part of two lockspaces.
func sameDisk(a, b *client.Lockspace) bool {
	return a.Disk.Path == b.Disk.Path && a.Disk.Offset == b.Disk.Offset
}

// matches is the identity rule of add/inq/rem (docs/delta.md "Lockspace lists"): name,
// path, offset, and host_id unless the request's is 0 (anyID).
func (sp *space) matches(ls *client.Lockspace, anyID bool) bool {
	if sp.ls.Name != ls.Name || !sameDisk(&sp.ls, ls) {
		return false
	}
	return sp.ls.HostID == ls.HostID || (anyID && ls.HostID == 0)
}

// find returns the first entry matching ls on list l. Called with m.mu.
func (m *Lockspaces) find(l list, ls *client.Lockspace, anyID bool) *space {
	for _, sp := range m.lists[l] {
		if sp.matches(ls, anyID) {
			return sp
		}
	}
	return nil
}

// byName returns the entry named name on list l. Called with m.mu.
func (m *Lockspaces) byName(l list, name string) *space {
	for _, sp := range m.lists[l] {
		if sp.ls.Name == name {
			return sp
		}
	}
	return nil
}

// anyByName looks on the spaces, add and rem lists in that order.
func (m *Lockspaces) anyByName(name string) *space {
	for _, l := range []list{listSpaces, listAdd, listRem} {
		if sp := m.byName(l, name); sp != nil {
			return sp
		}
	}
	return nil
}

// move puts sp at the head of list to. Called with m.mu.
func (m *Lockspaces) move(sp *space, to list) {
	m.unlink(sp)
	sp.list = to
	m.lists[to] = append([]*space{sp}, m.lists[to]...)
}

// unlink removes sp from its list. Called with m.mu.
func (m *Lockspaces) unlink(sp *space) {
	l := m.lists[sp.list]
	for i, x := range l {
		if x == sp {
			m.lists[sp.list] = append(l[:i:i], l[i+1:]...)
			return
		}
	}
}

// Joined returns the runner of a joined lockspace (on the spaces list),
// for the resource layer (host liveness of lease owners, docs/delta.md "Host liveness for paxos").
func (m *Lockspaces) Joined(name string) (*delta.Lockspace, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.byName(listSpaces, name)
	if sp == nil || sp.run == nil {
		return nil, false
	}
	return sp.run, true
}

// RequestHost asks our renewals to set hostID's bit in lockspace name for
// set_bitmap_seconds (the REQUEST command's owner notification, docs/paxos.md
// "Request" step 5): -ENOSPC when not joined, -EINVAL for a bad host_id.
func (m *Lockspaces) RequestHost(name string, hostID uint64) int32 {
	if hostID == 0 || hostID > delta.MaxHostID {
		return client.RvEINVAL
	}
	run, ok := m.Joined(name)
	if !ok {
		return client.RvENOSPC
	}
	return int32(diskfmt.CodeOf(run.Request(hostID)))
}

// Add implements LockspaceManager (docs/delta.md "Adding a lockspace").
func (m *Lockspaces) Add(ctx context.Context, ls client.Lockspace, flags, ioTimeout uint32) int32 {
	if ls.Name == "" || ls.HostID == 0 || ls.Disk.Path == "" {
		return client.RvEINVAL
	}
	ident := client.Lockspace{Name: ls.Name, HostID: ls.HostID, Disk: client.Disk{Path: ls.Disk.Path, Offset: ls.Disk.Offset}}
	io := int(ioTimeout)
	if io <= 0 {
		// 3.8.5's daemon ignores -o and the io_timeout key: 0 means 10.
		// Taking our own -o here would make a mixed cluster disagree on
		// the event timing (a set_event bit lives for 6 x io_timeout).
		io = DefaultIOTimeout
	}

	m.mu.Lock()
	switch {
	case m.stopped:
		m.mu.Unlock()
		return client.RvEPERM
	case m.find(listSpaces, &ident, false) != nil:
		m.mu.Unlock()
		return client.RvEEXIST
	case m.find(listAdd, &ident, false) != nil:
		m.mu.Unlock()
		return client.RvEINPROGRESS
	case m.find(listRem, &ident, false) != nil:
		m.mu.Unlock()
		return client.RvEAGAIN
	}
	for _, l := range m.lists {
		for _, sp := range l {
			if sp.ls.Name == ident.Name || sameDisk(&sp.ls, &ident) {
				m.mu.Unlock()
				return client.RvEINVAL
			}
		}
	}
	m.lastID++
	sp := &space{m: m, id: m.lastID, ls: ident, ioTimeout: io, addDone: make(chan struct{}),
		gone: make(chan struct{}), kills: make(map[int]*killState), list: listAdd}
	sp.ctx, sp.cancel = context.WithCancel(m.baseContext())
	m.lists[listAdd] = append([]*space{sp}, m.lists[listAdd]...)
	m.wg.Add(1)
	m.mu.Unlock()

	m.lg().Warn(fmt.Sprintf("s%d lockspace %s", sp.id, client.LockspaceString(&ident)))
	go sp.thread()

	if flags&client.AddAsync != 0 {
		return 0
	}
	select {
	case <-sp.addDone:
		return sp.addResult
	case <-ctx.Done():
		return int32(diskfmt.ErrGeneric)
	}
}

// thread is the life of one lockspace: join, then the main-loop checks
// until it stops, then the release and the freeing of the entry.
func (sp *space) thread() {
	m := sp.m
	defer m.wg.Done()
	rv := sp.join()
	sp.addResult = rv
	if rv != 0 {
		// Free first: once the caller has its answer, the entry is gone.
		m.lg().Warn(fmt.Sprintf("s%d add_lockspace fail result %s lockspace %s: %s", sp.id, codeLog(rv),
			sp.ls.Name, sp.addCauseText()))
		sp.free()
		close(sp.addDone)
		return
	}
	close(sp.addDone)
	m.lg().Warn(fmt.Sprintf("s%d add_lockspace done", sp.id))
	sp.monitor()
	sp.stop()
}

// join opens the disk, starts the runner and waits for the acquire
// (docs/delta.md "Lockspace start-up"–"Completing the add"). It returns 0 after moving the entry to
// spaces.
func (sp *space) join() int32 {
	m := sp.m
	cfg := m.conf()
	dev, err := m.cfg.Open(sp.ls.Disk.Path)
	if err != nil {
		sp.addCause = fmt.Sprintf("open %s: %s", sp.disk(), causeLog(err, 0))
		sp.logf("open error %s: %s", sp.disk(), causeLog(err, 0))
		return client.RvENODEV
	}
	if sp.ls.HostID > delta.MaxHostID {
		// Beyond any geometry: the sizes decide between a bad lease and
		// SANLK_ADDLS_INVALID_HOSTID, as in the lockspace thread.
		ioctx, cancel := context.WithTimeout(sp.ctx, time.Duration(sp.ioTimeout)*time.Second)
		_, err := diskfmt.LockspaceGeometry(ioctx, dev, int64(sp.ls.Disk.Offset))
		cancel()
		_ = dev.Close()
		if err != nil {
			sp.addCause = fmt.Sprintf("read of the lockspace geometry at %s: %s", sp.disk(), causeLog(err, sp.ioTimeout))
			return int32(diskfmt.CodeOf(err))
		}
		sp.addCause = fmt.Sprintf("host_id %d is beyond the lockspace at %s", sp.ls.HostID, sp.disk())
		return int32(diskfmt.ErrAddLSInvalidHostID)
	}
	var wd WatchdogSession
	if cfg.UseWatchdog {
		var err error
		if wd, err = m.openWatchdog(sp.ls.Name, sp.ls.HostID); err != nil {
			sp.addCause = "wdmd_connect failed: " + causeLog(err, 0)
			sp.logf("wdmd_connect failed %s", causeLog(err, 0))
			_ = dev.Close()
			return int32(diskfmt.ErrWatchdog)
		}
	}
	hist := cfg.RenewalHistorySize
	if hist <= 0 {
		hist = -1
	}
	failSecs := uint64(delta.IDRenewalFailSeconds(sp.ioTimeout))
	var run *delta.Lockspace
	dcfg := delta.Config{
		Dev: dev, Offset: int64(sp.ls.Disk.Offset), Space: sp.ls.Name, HostID: sp.ls.HostID,
		HostName: m.hostName(), IOTimeout: sp.ioTimeout, WatchdogFireTimeout: cfg.WatchdogFireTimeout,
		SetBitmapSeconds: cfg.SetBitmapSeconds, HistorySize: hist, Clock: m.cfg.Clock, Logf: sp.deltaLogf,
		DebugRenew: cfg.DebugRenew, OnRenewal: m.renewalHook(sp.ls.Name),
	}
	if wd != nil {
		dcfg.OnAcquired = func(_ context.Context, last uint64) error {
			if err := wd.Activate(last, last+failSecs); err != nil {
				sp.logf("wdmd activate failed %s", causeLog(err, 0))
				return fmt.Errorf("%w: %v", diskfmt.ErrWatchdog, err)
			}
			m.mu.Lock()
			sp.wdActive = true
			m.mu.Unlock()
			return nil
		}
		dcfg.OnRenewed = func(ts uint64) {
			if err := wd.Renewed(ts, ts+failSecs); err != nil {
				// wdmd is gone and the host will be reset: stop renewing
				// (without releasing) rather than look alive (docs/wdmd.md "wdmd crash").
				m.lg().Error(fmt.Sprintf("s%d wdmd_test_live %d failed %s: renewals stopped, lockspace %s",
					sp.id, ts, causeLog(err, 0), sp.ls.Name))
				run.Halt()
			}
		}
	}
	run, err = delta.New(dcfg)
	if err != nil {
		sp.addCause = fmt.Sprintf("lockspace at %s: %s", sp.disk(), causeLog(err, sp.ioTimeout))
		_ = dev.Close()
		if wd != nil {
			_ = wd.Close()
		}
		return int32(diskfmt.CodeOf(err))
	}
	m.mu.Lock()
	sp.run, sp.wd = run, wd
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := run.Run(sp.ctx)
		if st := run.Status(); st.Joined {
			if err != nil && !errors.Is(err, context.Canceled) {
				sp.logf("lockspace runner stopped released %d lockspace %s disk %s: %s", b2i(st.Released),
					sp.ls.Name, sp.disk(), causeLog(err, sp.ioTimeout))
			} else {
				sp.logf("lockspace runner stopped released %d", b2i(st.Released))
			}
		}
		if wd != nil {
			// Still active only if holders may remain (daemon stop): wdmd
			// then keeps our expiry and the host is reset.
			_ = wd.Close()
		}
		_ = dev.Close()
	}()

	<-run.Joined()
	st := run.Status()
	if st.AcquireLastResult != diskfmt.OK {
		<-run.Done()
		sp.addCause = fmt.Sprintf("delta_acquire of host_id %d at %s: %s", sp.ls.HostID, sp.disk(),
			st.AcquireLastResult.Error())
		return int32(st.AcquireLastResult)
	}
	m.mu.Lock()
	if sp.removeReq || m.forced || m.stopped {
		m.mu.Unlock()
		sp.logf("add_lockspace undo %s", client.LockspaceString(&sp.ls))
		sp.deactivateWatchdog()
		sp.cancel()
		<-run.Done()
		return client.RvEPERM
	}
	m.move(sp, listSpaces)
	m.mu.Unlock()
	return 0
}

// openWatchdog connects lockspace space to the watchdog.
func (m *Lockspaces) openWatchdog(space string, hostID uint64) (WatchdogSession, error) {
	if m.cfg.OpenWatchdog != nil {
		return m.cfg.OpenWatchdog(space, hostID)
	}
	sock := m.conf().WdmdSocket
	if sock == "" {
		sock = wdmdclient.DefaultSocket
	}
	return wdmdclient.Open(sock, space, hostID)
}

// deactivateWatchdog removes our expiry from the watchdog once nothing
// uses the lockspace any more (all pids clear, add undone), so the host
// is not reset (docs/wdmd.md "sanlock side" step 5).
func (sp *space) deactivateWatchdog() {
	m := sp.m
	m.mu.Lock()
	wd, active := sp.wd, sp.wdActive
	sp.wdActive = false
	m.mu.Unlock()
	if wd == nil || !active {
		return
	}
	sp.logf("wdmd_test_live 0 0 to disable")
	if err := wd.Deactivate(); err != nil {
		m.lg().Error(fmt.Sprintf("s%d wdmd deactivate failed %s, lockspace %s", sp.id, causeLog(err, 0), sp.ls.Name))
	}
}

// free removes the entry and closes its listeners.
func (sp *space) free() {
	m := sp.m
	sp.cancel()
	m.mu.Lock()
	m.unlink(sp)
	ls := sp.listeners
	sp.listeners = nil
	m.mu.Unlock()
	for _, c := range ls {
		_ = c.Close()
	}
	close(sp.gone)
}

// stop ends a lockspace that left the spaces list: the runner releases the
// lease if its last attempt succeeded (docs/delta.md "Removing a lockspace"), then the entry is
// freed.
func (sp *space) stop() {
	sp.cancel()
	sp.m.mu.Lock()
	run := sp.run
	sp.m.mu.Unlock()
	if run != nil {
		<-run.Done()
	}
	sp.logf("free lockspace")
	sp.free()
	if g, ok := sp.m.usage().(interface{ SpaceGone(string) }); ok {
		g.SpaceGone(sp.ls.Name)
	}
}

// monitor is the per-lockspace main loop (docs/delta.md "Main loop"): every second
// check our own lease and the other hosts; once the lockspace is dying,
// signal its holders until none is left, then move it to rem and return.
func (sp *space) monitor() {
	m := sp.m
	run := sp.run
	for {
		interval := m.cfg.CheckInterval
		switch sp.pass(run) {
		case passStop:
			return
		case passKilling:
			interval /= 5
		default:
			interval = min(sp.untilDeadline(run, interval), untilBoundary(m.cfg.Clock.Now(), interval))
		}
		if m.cfg.Clock.Sleep(sp.ctx, interval) != nil {
			// Daemon stop: leave without waiting for holders.
			m.mu.Lock()
			if sp.list == listSpaces {
				m.move(sp, listRem)
			}
			m.mu.Unlock()
			return
		}
	}
}

// untilBoundary is the time from now to the next multiple of every on the
// clock. Passes that come on the clock's whole seconds (monotime changes
// exactly there) rather than at each lockspace's own phase let the
// runtime wake once a second for all idle lockspaces instead of once per
// lockspace.
func untilBoundary(now, every time.Duration) time.Duration {
	if every <= 0 {
		return every
	}
	return every - now%every
}

// untilDeadline shortens the sleep before the next pass so that it comes
// right at the failure deadline L + id_renewal_fail_seconds (L = the last
// successful renewal, docs/delta.md "Own-lease check") instead of up to a CheckInterval
// later: recovery (kill program, SIGTERM) then starts within a few
// milliseconds of the deadline and the holders get their whole grace
// period before the watchdog fires (docs/wdmd.md, TestEscalation). A
// renewal during the sleep just makes that pass find the lease good.
func (sp *space) untilDeadline(run *delta.Lockspace, interval time.Duration) time.Duration {
	st := run.Status()
	if st.RenewalLastSuccess == 0 {
		return interval
	}
	// Monotime is whole seconds of the same clock, so the check fails
	// exactly from (L+fail) seconds on.
	deadline := time.Duration(st.RenewalLastSuccess+uint64(delta.IDRenewalFailSeconds(sp.ioTimeout))) * time.Second
	if d := deadline - sp.m.cfg.Clock.Now(); d > 0 && d < interval {
		return d
	}
	return interval
}

type passResult int

const (
	passOK passResult = iota
	passKilling
	passStop
)

// pass is one main-loop pass for this lockspace.
func (sp *space) pass(run *delta.Lockspace) passResult {
	m := sp.m
	u := m.usage()
	m.mu.Lock()
	killing := sp.killingPids != 0
	m.mu.Unlock()

	if !killing {
		st, _ := run.CheckOwnLease()
		m.mu.Lock()
		remove, forced := sp.removeReq, m.forced
		if st.Failed() || remove || forced {
			sp.spaceDead, sp.killingPids = true, 1
			killing = true
		}
		m.mu.Unlock()
		if !killing {
			sp.processHosts(run)
			return passOK
		}
		sp.logf("set killing_pids check %d remove %d", b2i(st.Failed()), b2i(remove || forced))
		if u != nil {
			u.SpaceDead(sp.ls.Name)
		}
	}

	var holders []int
	var orphans int
	if u != nil {
		holders = u.SpaceHolders(sp.ls.Name)
		_, orphans = u.SpaceResources(sp.ls.Name)
	}
	if sp.allGone(holders, orphans) {
		sp.deactivateWatchdog() // as early as possible: no reset needed
		// Nothing uses the lockspace any more: if it is dying because the
		// renewals failed, the runner may release the lease once the
		// storage answers again (bounded, delta.LateReleaseDeadline).
		// Not for rem_lockspace or a forced shutdown: those return as
		// before instead of waiting for the storage.
		m.mu.Lock()
		late := !sp.removeReq && !m.forced
		m.mu.Unlock()
		if late {
			run.ReleaseWhenBack(m.baseContext())
		}
		m.mu.Lock()
		m.move(sp, listRem)
		m.mu.Unlock()
		sp.logf("set thread_stop")
		return passStop
	}
	sp.killPids(run, holders)
	return passKilling
}

// allGone is the test of docs/delta.md "All holders gone".
func (sp *space) allGone(holders []int, orphans int) bool {
	m := sp.m
	m.mu.Lock()
	defer m.mu.Unlock()
	live, stuck := 0, 0
	for _, pid := range holders {
		if k := sp.kills[pid]; k != nil && k.count >= killCountMax {
			stuck++
		} else {
			live++
		}
	}
	if live == 0 && stuck > 0 && sp.killingPids != 2 {
		sp.killingPids = 2
		m.lg().Error(fmt.Sprintf("s%d killing pids stuck %d, lockspace %s", sp.id, stuck, sp.ls.Name))
	}
	if live+stuck > 0 {
		return false
	}
	if sp.externalUsed {
		if sp.usedRetries%1000 == 0 {
			m.lg().Warn(fmt.Sprintf("s%d used external blocking lockspace removal", sp.id))
		}
		sp.usedRetries++
		return false
	}
	if sp.usedByOrphans && orphans > 0 {
		if sp.usedRetries%1000 == 0 {
			m.lg().Warn(fmt.Sprintf("s%d used by orphan %d blocking lockspace removal", sp.id, orphans))
		}
		sp.usedRetries++
		return false
	}
	m.lg().Warn(fmt.Sprintf("s%d all pids clear", sp.id))
	return true
}

// killPids signals the holders of a dying lockspace (docs/delta.md "Signalling holders",
// docs/protocol.md "Kill program"), at most once a second each and killCountMax times in all.
// Before the grace period ends, a holder that set a kill program (KILLPATH)
// gets it run once (with its pid as last argument if it asked for that)
// and nothing more until the grace ends; others get SIGTERM. After it, and
// for rem_lockspace and forced shutdown, SIGKILL. Restrict flags swap the
// two signals.
func (sp *space) killPids(run *delta.Lockspace, holders []int) {
	m := sp.m
	cfg := m.conf()
	now := m.cfg.Clock.Now()
	st := run.Status()
	graceEnd := delta.KillGraceEnd(st.RenewalLastSuccess, sp.ioTimeout, cfg.KillGraceSeconds)
	graceful := !sp.removeReq && !m.forced && uint64(now/time.Second) < graceEnd
	type sig struct {
		pid int
		sig syscall.Signal
		n   int
		k   *killState
	}
	var out []sig
	m.mu.Lock()
	if sp.killingPids == 2 {
		m.mu.Unlock()
		return
	}
	for _, pid := range holders {
		k := sp.kills[pid]
		if k == nil {
			k = &killState{}
			sp.kills[pid] = k
		}
		if k.count >= killCountMax || (k.count > 0 && now-k.last < time.Second) {
			continue
		}
		if graceful && k.ranKillpath {
			continue // the kill program had its chance until the grace ends
		}
		k.count++
		k.last = now
		s := syscall.SIGKILL
		if graceful {
			s = syscall.SIGTERM
		}
		out = append(out, sig{pid, s, k.count, k})
	}
	m.mu.Unlock()
	for _, k := range out {
		s := k.sig
		var argv []string
		if m.srv != nil {
			if c := m.srv.FindClient(k.pid); c != nil {
				r := c.Restricted()
				path, args, flags := c.killpathInfo()
				switch {
				case s == syscall.SIGTERM && path != "" && cfg.KillGraceSeconds > 0:
					pidArg := 0
					if flags&client.KillpathPID != 0 {
						pidArg = k.pid
					}
					argv = killpathArgv(path, args, pidArg)
				case s == syscall.SIGKILL && r&client.RestrictSigkill != 0:
					s = syscall.SIGTERM
				case s == syscall.SIGTERM && r&client.RestrictSigterm != 0:
					s = syscall.SIGKILL
				}
				c.mu.Lock()
				c.killCount, c.killLast = k.n, uint64(now/time.Second)
				if argv != nil {
					c.flags |= 0x2 // runpath sent
				}
				c.mu.Unlock()
			}
		}
		if argv != nil {
			m.mu.Lock()
			k.k.ranKillpath = true
			m.mu.Unlock()
			sp.logf("kill %d killpath %s count %d", k.pid, strings.Join(argv, " "), k.n)
			if err := m.runKillpath(argv); err != nil {
				sp.logf("kill %d killpath error %s, lockspace %s", k.pid, causeLog(err, 0), sp.ls.Name)
			}
			continue
		}
		sp.logf("kill %d sig %d count %d", k.pid, int(s), k.n)
		if err := m.cfg.Kill(k.pid, s); err != nil && !errors.Is(err, unix.ESRCH) {
			sp.logf("kill %d sig %d error %s, lockspace %s", k.pid, int(s), causeLog(err, 0), sp.ls.Name)
		}
	}
}

// runKillpath starts a kill program (LockspacesConfig.RunKillpath, or the
// resource manager's, or fork/exec).
func (m *Lockspaces) runKillpath(argv []string) error {
	if m.cfg.RunKillpath != nil {
		return m.cfg.RunKillpath(argv)
	}
	if m.srv != nil {
		if r, ok := m.srv.deps.Resources.(*Resources); ok {
			return r.cfg.RunKillpath(argv)
		}
	}
	return startKillpath(argv)
}

// processHosts runs the other-host processing on a new renewal read and
// hands out its events and requests (docs/delta.md "Watching other hosts", "Receiving events").
func (sp *space) processHosts(run *delta.Lockspace) {
	res, ok := run.ProcessHosts()
	if !ok {
		return
	}
	for _, ev := range res.Events {
		sp.deliver(ev)
	}
	if len(res.Requests) > 0 {
		sp.m.examine(sp.ls.Name)
	}
}

// Rem implements LockspaceManager (docs/delta.md "Removing a lockspace").
func (m *Lockspaces) Rem(ctx context.Context, ls client.Lockspace, flags uint32) int32 {
	if flags&client.RemUnused != 0 {
		if u := m.usage(); u != nil {
			if all, _ := u.SpaceResources(ls.Name); all > 0 {
				return client.RvEBUSY
			}
		}
	}
	m.mu.Lock()
	if m.find(listRem, &ls, true) != nil {
		m.mu.Unlock()
		return client.RvEINPROGRESS
	}
	sp := m.find(listAdd, &ls, true)
	if sp != nil {
		sp.removeReq = true
		sp.cancel() // aborts the acquire (-201) or makes the add undo (-1)
	} else if sp = m.find(listSpaces, &ls, true); sp != nil {
		sp.removeReq = true
	} else {
		m.mu.Unlock()
		return client.RvENOENT
	}
	m.mu.Unlock()
	if flags&client.RemAsync != 0 {
		return 0
	}
	select {
	case <-sp.gone:
		return 0
	case <-ctx.Done():
		return int32(diskfmt.ErrGeneric)
	}
}

// Inq implements LockspaceManager (docs/delta.md "inq_lockspace").
func (m *Lockspaces) Inq(ctx context.Context, ls client.Lockspace, flags uint32) int32 {
	for {
		rv := m.inq(&ls)
		if rv != client.RvEINPROGRESS || flags&client.InqWait == 0 {
			return rv
		}
		if m.cfg.Clock.Sleep(ctx, m.cfg.PollInterval) != nil {
			return rv
		}
	}
}

func (m *Lockspaces) inq(ls *client.Lockspace) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.find(listSpaces, ls, true) != nil:
		return 0
	case m.find(listAdd, ls, true) != nil, m.find(listRem, ls, true) != nil:
		return client.RvEINPROGRESS
	}
	return client.RvENOENT
}

// List implements LockspaceManager: spaces, then rem, then add (docs/delta.md "get_lockspaces").
func (m *Lockspaces) List() []client.Lockspace {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []client.Lockspace
	for _, e := range []struct {
		l     list
		flags uint32
	}{{listSpaces, 0}, {listRem, client.LSFRem}, {listAdd, client.LSFAdd}} {
		for _, sp := range m.lists[e.l] {
			ls := sp.ls
			ls.Flags = e.flags
			out = append(out, ls)
		}
	}
	return out
}

// Count implements LockspaceManager.
func (m *Lockspaces) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.lists[listAdd]) + len(m.lists[listSpaces]) + len(m.lists[listRem])
}

// ShutdownAll implements LockspaceManager: every lockspace is removed as
// by rem_lockspace (holders get SIGKILL), adds are aborted, and it returns
// when all are gone (docs/delta.md "Shutdown").
func (m *Lockspaces) ShutdownAll(ctx context.Context) error {
	m.mu.Lock()
	m.forced = true
	var all []*space
	for _, l := range m.lists {
		all = append(all, l...)
	}
	for _, sp := range m.lists[listAdd] {
		sp.cancel()
	}
	m.mu.Unlock()
	for _, sp := range all {
		select {
		case <-sp.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// StatusRecords implements LockspaceManager: LOCKSPACE records of joined,
// then being added, then being removed lockspaces (docs/protocol.md "Commands" #5, "Record texts").
func (m *Lockspaces) StatusRecords() []client.StateRecord {
	m.mu.Lock()
	var all []*space
	for _, l := range []list{listSpaces, listAdd, listRem} {
		all = append(all, m.lists[l]...)
	}
	type snap struct {
		sp              *space
		list            list
		run             *delta.Lockspace
		dead            bool
		killing         int
		retries         uint32
		used, byOrphans bool
	}
	snaps := make([]snap, len(all))
	for i, sp := range all {
		snaps[i] = snap{sp, sp.list, sp.run, sp.spaceDead, sp.killingPids, sp.usedRetries, sp.externalUsed, sp.usedByOrphans}
	}
	m.mu.Unlock()

	cfg := m.conf()
	recs := make([]client.StateRecord, 0, len(snaps))
	for _, s := range snaps {
		var st delta.Status
		if s.run != nil {
			st = s.run.Status()
		}
		extend := s.sp.ioTimeout
		if cfg.RenewalReadExtendSet {
			extend = cfg.RenewalReadExtendSec
		}
		text := fmt.Sprintf("list=%s space_id=%d io_timeout=%d sector_size=%d align_size=%d host_generation=%d "+
			"renew_fail=%d space_dead=%d killing_pids=%d used_retries=%d external_used=%d used_by_orphans=%d "+
			"renewal_read_extend_sec=%d set_max_sectors_kb=%d corrupt_result=%d acquire_last_result=%d "+
			"renewal_last_result=%d acquire_last_attempt=%d acquire_last_success=%d renewal_last_attempt=%d "+
			"renewal_last_success=%d",
			s.list, s.sp.id, s.sp.ioTimeout, st.SectorSize, st.AlignSize, st.HostGeneration,
			b2i(st.RenewFail), b2i(s.dead), s.killing, s.retries, b2i(s.used), b2i(s.byOrphans),
			extend, 0, int(st.CorruptResult), int(st.AcquireLastResult),
			int(st.RenewalLastResult), st.AcquireLastAttempt, st.AcquireLastSuccess, st.RenewalLastAttempt,
			st.RenewalLastSuccess)
		ls := s.sp.ls
		ls.Disk.Pad1 = uint32(st.SectorSize)
		recs = append(recs, client.StateRecord{
			State:     client.State{Type: client.StateLockspace, Data64: ls.HostID, Name: ls.Name},
			Text:      text,
			Lockspace: &ls,
		})
	}
	return recs
}

// HostStatus implements LockspaceManager (docs/protocol.md "Commands" #15, "Record texts"): the
// name is looked up on all three lists.
func (m *Lockspaces) HostStatus(name string) ([]client.StateRecord, int32) {
	m.mu.Lock()
	sp := m.anyByName(name)
	var run *delta.Lockspace
	if sp != nil {
		run = sp.run
	}
	m.mu.Unlock()
	if sp == nil {
		return nil, client.RvENOSPC
	}
	if run == nil {
		return nil, 0
	}
	var recs []client.StateRecord
	for _, h := range run.HostStatuses() {
		recs = append(recs, client.StateRecord{
			State: client.State{Type: client.StateHost, Data32: uint32(h.HostID), Data64: h.Timestamp},
			Text:  hostStatusText(&h),
		})
	}
	return recs, 0
}

// hostStatusText is the HOST record text (docs/protocol.md "Record texts").
func hostStatusText(h *delta.HostStatus) string {
	name := h.OwnerName
	if len(name) > client.NameLen {
		name = name[:client.NameLen]
	}
	return fmt.Sprintf("last_check=%d last_live=%d last_req=%d owner_id=%d owner_generation=%d timestamp=%d "+
		"io_timeout=%d owner_name=%s", h.LastCheck, h.LastLive, h.LastReq, h.OwnerID, h.OwnerGeneration,
		h.Timestamp, h.IOTimeout, name)
}

// getHosts answers GET_HOSTS (docs/delta.md "get_hosts").
func (m *Lockspaces) getHosts(name string, hostID uint64) ([]client.Host, int32) {
	run, ok := m.Joined(name)
	if !ok {
		return nil, client.RvENOENT
	}
	infos, err := run.GetHosts(hostID)
	if err != nil {
		return nil, int32(diskfmt.CodeOf(err))
	}
	out := make([]client.Host, len(infos))
	for i, h := range infos {
		out[i] = client.Host{HostID: h.HostID, Generation: h.Generation, Timestamp: h.Timestamp,
			IOTimeout: h.IOTimeout, Flags: uint32(h.State)}
	}
	return out, 0
}

// renewals answers RENEWAL: the history and the own io_timeout, or
// -ENOSPC when no lockspace of that name exists.
func (m *Lockspaces) renewals(name string) ([]delta.HistoryEntry, int, int32) {
	m.mu.Lock()
	sp := m.anyByName(name)
	var run *delta.Lockspace
	if sp != nil {
		run = sp.run
	}
	m.mu.Unlock()
	if sp == nil {
		return nil, 0, client.RvENOSPC
	}
	if run == nil {
		return nil, sp.ioTimeout, 0
	}
	return run.Renewals(), sp.ioTimeout, 0
}

// setEvent answers SET_EVENT (docs/delta.md "set_event").
func (m *Lockspaces) setEvent(name string, he client.HostEvent, flags uint32) int32 {
	if name == "" || he.HostID == 0 || he.HostID > delta.MaxHostID {
		return client.RvEINVAL
	}
	run, ok := m.Joined(name)
	if !ok {
		return client.RvENOENT
	}
	err := run.SetEvent(delta.HostEvent{HostID: he.HostID, Generation: he.Generation, Event: he.Event, Data: he.Data}, flags)
	return int32(diskfmt.CodeOf(err))
}

// setConfig answers SET_CONFIG (docs/delta.md "set_config").
func (m *Lockspaces) setConfig(name string, cmd uint32) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.byName(listSpaces, name)
	if sp == nil {
		return client.RvENOENT
	}
	switch cmd {
	case client.ConfigUsed, client.ConfigUsedByOrphans:
		if sp.spaceDead {
			return client.RvENOSPC
		}
		if cmd == client.ConfigUsed {
			sp.externalUsed = true
		} else {
			sp.usedByOrphans = true
		}
	case client.ConfigUnused:
		sp.externalUsed = false
	case client.ConfigUnusedByOrphans:
		sp.usedByOrphans = false
	default:
		return client.RvEINVAL
	}
	return 0
}
