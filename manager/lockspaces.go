package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/internal/sanlog"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// WatchdogSession is one lockspace's use of the watchdog (docs/wdmd.md "sanlock side"):
// Activate after the host_id lease is acquired (expiry L + 8*io_timeout),
// Renewed after each renewal, Deactivate once no process uses the
// lockspace any more, Close at the end; a handover carries it
// (WatchdogHandover). wdmdclient.Session is the production one.
type WatchdogSession interface {
	Activate(renewal, expire uint64) error
	Renewed(ts, expire uint64) error
	Deactivate() error
	Close() error
	WatchdogHandover
}

// LockspaceUsage is what the lockspaces need from the resource side
// (Resources implements it; New wires it). The lockspace manager uses it for REM_UNUSED, for the "all
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
	// SpaceGone tells that space has been freed: its orphans are dropped.
	SpaceGone(space string)
	// Examine asks for the held resources of space to be examined.
	Examine(space string)
}

// renewalHook is the delta.Config.OnRenewal of lockspace space (Setup.OnRenewal).
func (m *Lockspaces) renewalHook(space string) func(error, int64, int64) {
	if m.cfg.OnRenewal == nil {
		return nil
	}
	return m.cfg.OnRenewal(space)
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

// Lockspaces is the lockspace registry of the manager: one delta.Lockspace
// runner per joined lockspace, on the add/spaces/rem lists of sanlock
// (docs/delta.md "Lifecycle"). Each lockspace has its own goroutines, one renewing (all
// its disk I/O) and one doing the main-loop checks, so a slow or hung
// disk only ever delays its own lockspace. The registry mutex is never
// held across disk I/O or socket writes.
//
// The daemon's handlers of the lockspace commands call it (ADD, REM,
// INQ_LOCKSPACE, GET_HOSTS, RENEWAL, WRITE/READ_LOCKSPACE, SET_EVENT,
// REG/END_EVENT, SET_CONFIG, EXAMINE_LOCKSPACE, ...).
type Lockspaces struct {
	cfg   *Setup         // shared with Resources, defaults applied
	usage LockspaceUsage // the resource side, wired by New
	// clients is the client registry (the holders' kill settings), wired by New.
	clients *ClientRegistry

	wg sync.WaitGroup // every lockspace goroutine

	mu      sync.Mutex
	lastID  uint32
	lists   [3][]*space // index list; newest first
	forced  bool        // forced shutdown in progress
	stopped bool
	// restarting counts, by name, the ADD_LOCKSPACE requests a live
	// reexec cancelled to run again (cancelAdd, ExpectAdd): inq reports
	// them in progress until the add runs, so an INQ_LOCKSPACE WAIT does
	// not see the lockspace vanish in between.
	restarting map[string]int
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

func (m *Lockspaces) lg() *zap.Logger { return m.cfg.Log }

func (m *Lockspaces) conf() *Settings { return &m.cfg.Settings }

// defaultIOTimeout is the io_timeout of a request that passes 0: the
// daemon's (Settings.IOTimeout), else DefaultIOTimeout.
func (m *Lockspaces) defaultIOTimeout() int {
	if io := m.conf().IOTimeout; io > 0 {
		return io
	}
	return DefaultIOTimeout
}

func (m *Lockspaces) baseContext() context.Context { return m.cfg.Context }

func (m *Lockspaces) hostName() string { return m.cfg.HostName }

// examine asks the resource layer to examine the resources held in space:
// Setup.Examine, else the resource side's.
func (m *Lockspaces) examine(space string) {
	if m.cfg.Examine != nil {
		m.cfg.Examine(space)
		return
	}
	if m.usage != nil {
		m.usage.Examine(space)
	}
}

// ending is how far a lockspace is in its end, under Lockspaces.mu. It
// only moves forward (space.pass, space.allGone): endLiving, endKilling,
// endStuck; once all holders are gone the entry leaves for the rem list.
type ending uint8

const (
	// endLiving: the lockspace serves. A failed own lease, rem_lockspace
	// or a forced shutdown starts its end.
	endLiving ending = iota
	// endKilling: the lockspace is dead (space_dead=1): its tokens are
	// freed without disk I/O and its holders are being killed
	// (killing_pids=1).
	endKilling
	// endStuck: every holder left has ignored its kills (killing_pids=2).
	endStuck
)

// dead is STATUS's space_dead: the end has begun.
func (e ending) dead() bool { return e != endLiving }

// killingPids is STATUS's killing_pids: 0, 1, or 2 once stuck.
func (e ending) killingPids() int { return int(e) }

// space is one lockspace entry (sanlock's struct space).
type space struct {
	m  *Lockspaces
	id uint32
	ls wire.Lockspace // identity: name, host_id, path, offset
	// ioTimeout is the own io_timeout (ioTimeoutNow); SET_CONFIG
	// IO_TIMEOUT changes it at a renewal (syncIOTimeout).
	ioTimeout atomic.Int32
	noDelay   bool // ADD_LOCKSPACE NODELAY: join without the acquire waits

	ctx    context.Context // the runner's; cancelled to stop or abort it
	cancel context.CancelFunc

	addDone   chan struct{} // closed when the add has its outcome
	addResult error
	addCause  string // what failed when addResult != 0, for the log
	// clientCause is what failed, for the client that asked (CauseError):
	// addCause in plain words.
	clientCause string
	addBegin    time.Duration // the manager's clock when the add began
	gone        chan struct{} // closed when the entry has been freed

	// Under m.mu.
	list          list
	run           *delta.Lockspace // nil until the device is open
	paxos         *paxos.Host      // built by PaxosHost on first use
	wd            WatchdogSession  // nil with -w 0
	wdActive      bool             // activated and not yet deactivated
	removeReq     bool             // rem_lockspace asked for the end (not the lease)
	end           ending           // endLiving until the end begins
	usedRetries   uint32
	externalUsed  bool
	usedByOrphans bool
	kills         map[int]*killState
	listeners     []Listener

	// wake ends the main loop's idle wait early (capacity 1: clock.Wake
	// never blocks): a renewal attempt, rem_lockspace, the forced
	// shutdown (space.monitor).
	wake chan struct{}
}

// log is the logger of the lockspace's lines ("s<id> " before the message).
func (sp *space) log() *zap.Logger {
	return sp.m.lg().With(sanlog.Prefix(fmt.Sprintf("s%d ", sp.id)))
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

// deltaLog is the logger of the delta runner: sp.log with the lockspace
// name and disk, which the delta package does not know (it has a Device,
// not a path).
func (sp *space) deltaLog() *zap.Logger {
	return sp.log().With(spaceField(sp.ls.Name), zap.String("lockspace_disk", sp.disk()))
}

// sameDisk compares the disk part of two lockspaces.
func sameDisk(a, b *wire.Lockspace) bool {
	return a.Disk.Path == b.Disk.Path && a.Disk.Offset == b.Disk.Offset
}

// matches is the identity rule of add/inq/rem (docs/delta.md "Lockspace lists"): name,
// path, offset, and host_id unless the request's is 0 (anyID).
func (sp *space) matches(ls *wire.Lockspace, anyID bool) bool {
	if sp.ls.Name != ls.Name || !sameDisk(&sp.ls, ls) {
		return false
	}
	return sp.ls.HostID == ls.HostID || (anyID && ls.HostID == 0)
}

// find returns the first entry matching ls on list l. Called with m.mu.
func (m *Lockspaces) find(l list, ls *wire.Lockspace, anyID bool) *space {
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
func (m *Lockspaces) RequestHost(name string, hostID uint64) error {
	if hostID == 0 || hostID > delta.MaxHostID {
		return rescode.Code(rescode.RvEINVAL)
	}
	run, ok := m.Joined(name)
	if !ok {
		return rescode.Code(rescode.RvENOSPC)
	}
	return resultErr(run.Request(hostID))
}

// AddRequest is ADD_LOCKSPACE (docs/protocol.md "Commands" #2).
type AddRequest struct {
	Lockspace wire.Lockspace
	Async     bool   // return once the add has started (wire.AddAsync)
	IOTimeout uint32 // 0: the daemon's io_timeout (Settings.IOTimeout)
	// NoDelay (wire.AddNoDelay, 5.x) joins in about a second: the waits
	// that detect another host using the same host_id are skipped
	// (docs/delta.md "NODELAY"). Unsafe when host_ids
	// may be shared by mistake.
	NoDelay bool
}

// Add joins a lockspace (docs/delta.md "Adding a lockspace"). Without Async
// it returns when the host_id lease is held or has failed.
func (m *Lockspaces) Add(ctx context.Context, req AddRequest) error {
	flags := uint32(0)
	if req.Async {
		flags = wire.AddAsync
	}
	if req.NoDelay {
		flags |= wire.AddNoDelay
	}
	return m.add(ctx, req.Lockspace, flags, req.IOTimeout)
}

func (m *Lockspaces) add(ctx context.Context, ls wire.Lockspace, flags, ioTimeout uint32) error {
	if ls.Name == "" || ls.HostID == 0 || ls.Disk.Path == "" {
		return causeErr(rescode.ErrEINVAL, "a lockspace needs a name, a host_id and a disk path")
	}
	ident := wire.Lockspace{Name: ls.Name, HostID: ls.HostID, Disk: wire.Disk{Path: ls.Disk.Path, Offset: ls.Disk.Offset}}
	io := int(ioTimeout)
	if io <= 0 {
		// 0 is the daemon's io_timeout, as in 3.9.5 and 5.1.1 (3.8.5
		// ignores -o and the key and takes 10, which is also our
		// default). Every host of a lockspace must use the same one: a
		// set_event bit lives for 6 x io_timeout.
		io = m.defaultIOTimeout()
	}

	m.mu.Lock()
	if m.restarting[ident.Name] > 0 {
		m.restarting[ident.Name]-- // the restarted add runs: registered or refused here
	}
	switch {
	case m.stopped:
		m.mu.Unlock()
		return causeErr(rescode.ErrEPERM, "the daemon is shutting down")
	case m.find(listSpaces, &ident, false) != nil:
		m.mu.Unlock()
		return causeErr(rescode.ErrEEXIST, "lockspace "+ident.Name+" is already joined")
	case m.find(listAdd, &ident, false) != nil:
		m.mu.Unlock()
		return causeErr(rescode.ErrEINPROGRESS, "lockspace "+ident.Name+" is being joined")
	case m.find(listRem, &ident, false) != nil:
		m.mu.Unlock()
		return causeErr(rescode.ErrEAGAIN, "lockspace "+ident.Name+" is being left")
	}
	for _, l := range m.lists {
		for _, sp := range l {
			if sp.ls.Name == ident.Name || sameDisk(&sp.ls, &ident) {
				m.mu.Unlock()
				return causeErr(rescode.ErrEINVAL, fmt.Sprintf("lockspace %s:%d:%s already uses that name or disk",
					sp.ls.Name, sp.ls.HostID, sp.disk()))
			}
		}
	}
	m.lastID++
	sp := &space{m: m, id: m.lastID, ls: ident, noDelay: flags&wire.AddNoDelay != 0, addDone: make(chan struct{}),
		gone: make(chan struct{}), kills: make(map[int]*killState), list: listAdd, wake: make(chan struct{}, 1)}
	sp.ioTimeout.Store(int32(io))
	sp.addBegin = m.cfg.Clock.Now()
	sp.ctx, sp.cancel = context.WithCancel(m.baseContext())
	m.lists[listAdd] = append([]*space{sp}, m.lists[listAdd]...)
	m.wg.Add(1)
	m.mu.Unlock()

	sp.log().Warn("lockspace " + wire.LockspaceString(&ident))
	m.cfg.spawn(sp.thread)

	if flags&wire.AddAsync != 0 {
		return nil
	}
	select {
	case <-sp.addDone:
		return sp.addResult
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrRestart) {
			return m.cancelAdd(sp)
		}
		return rescode.ErrGeneric
	}
}

// RemRequest is REM_LOCKSPACE (docs/protocol.md "Commands" #3).
type RemRequest struct {
	Lockspace wire.Lockspace
	Async     bool // return at once (wire.RemAsync)
	Unused    bool // refuse with -EBUSY while resources exist (wire.RemUnused)
}

// Rem leaves a lockspace (docs/delta.md "Removing a lockspace").
func (m *Lockspaces) Rem(ctx context.Context, req RemRequest) error {
	var flags uint32
	if req.Async {
		flags |= wire.RemAsync
	}
	if req.Unused {
		flags |= wire.RemUnused
	}
	return m.rem(ctx, req.Lockspace, flags)
}

func (m *Lockspaces) rem(ctx context.Context, ls wire.Lockspace, flags uint32) error {
	if flags&wire.RemUnused != 0 {
		if u := m.usage; u != nil {
			if all, _ := u.SpaceResources(ls.Name); all > 0 {
				return causeErr(rescode.ErrEBUSY, fmt.Sprintf("lockspace %s has %d resource lease(s) in use", ls.Name, all))
			}
		}
	}
	m.mu.Lock()
	if m.find(listRem, &ls, true) != nil {
		m.mu.Unlock()
		return causeErr(rescode.ErrEINPROGRESS, "lockspace "+ls.Name+" is being left")
	}
	sp := m.find(listAdd, &ls, true)
	if sp != nil {
		sp.removeReq = true
		sp.cancel() // aborts the acquire (-201) or makes the add undo (-1)
	} else if sp = m.find(listSpaces, &ls, true); sp != nil {
		sp.removeReq = true
		clock.Wake(sp.wake) // the main loop starts the removal now
	} else {
		m.mu.Unlock()
		return causeErr(rescode.ErrENOENT, "lockspace "+ls.Name+" is not joined")
	}
	m.mu.Unlock()
	if flags&wire.RemAsync != 0 {
		return nil
	}
	select {
	case <-sp.gone:
		return nil
	case <-ctx.Done():
		return rescode.ErrGeneric
	}
}

// InqRequest is INQ_LOCKSPACE (docs/protocol.md "Commands" #16).
type InqRequest struct {
	Lockspace wire.Lockspace
	Wait      bool // wait while being added or removed (wire.InqWait)
}

// Inq reports whether a lockspace is joined (docs/delta.md "inq_lockspace"):
// nil, -ENOENT or -EINPROGRESS.
func (m *Lockspaces) Inq(ctx context.Context, req InqRequest) error {
	var flags uint32
	if req.Wait {
		flags = wire.InqWait
	}
	return m.inqWait(ctx, req.Lockspace, flags)
}

func (m *Lockspaces) inqWait(ctx context.Context, ls wire.Lockspace, flags uint32) error {
	for {
		err := m.inq(&ls)
		if rescode.CodeOf(err) != rescode.ErrEINPROGRESS || flags&wire.InqWait == 0 {
			return err
		}
		if m.cfg.Clock.Sleep(ctx, m.cfg.PollInterval) != nil {
			return err
		}
	}
}

func (m *Lockspaces) inq(ls *wire.Lockspace) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.find(listSpaces, ls, true) != nil:
		return nil
	case m.find(listAdd, ls, true) != nil, m.find(listRem, ls, true) != nil:
		return rescode.Code(rescode.RvEINPROGRESS)
	case m.restarting[ls.Name] > 0:
		return rescode.Code(rescode.RvEINPROGRESS) // its add runs again (cancelAdd)
	}
	return rescode.Code(rescode.RvENOENT)
}

// List returns every lockspace: spaces, then rem, then add (docs/delta.md "get_lockspaces").
func (m *Lockspaces) List() []wire.Lockspace {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []wire.Lockspace
	for _, e := range []struct {
		l     list
		flags uint32
	}{{listSpaces, 0}, {listRem, wire.LSFRem}, {listAdd, wire.LSFAdd}} {
		for _, sp := range m.lists[e.l] {
			ls := sp.ls
			ls.Flags = e.flags
			if sp.run != nil && sp.run.Status().NoTimeout {
				ls.Flags |= wire.LSFNoTimeout
			}
			out = append(out, ls)
		}
	}
	return out
}

// Count is the number of lockspaces in any state.
func (m *Lockspaces) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.lists[listAdd]) + len(m.lists[listSpaces]) + len(m.lists[listRem])
}

// ShutdownAll is the forced shutdown: every lockspace is removed as
// by rem_lockspace (holders get SIGKILL), adds are aborted, and it returns
// when all are gone (docs/delta.md "Shutdown").
func (m *Lockspaces) ShutdownAll(ctx context.Context) error {
	m.mu.Lock()
	m.forced = true
	var all []*space
	for _, l := range m.lists {
		all = append(all, l...)
	}
	for _, sp := range m.lists[listSpaces] {
		clock.Wake(sp.wake) // the main loops start the removal now
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
