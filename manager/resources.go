package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/sanlog"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// resList is the host-wide list a resource is on (docs/paxos.md "Resource lists").
type resList int

const (
	resAdd resList = iota
	resHeld
	resRem
	resOrphan
)

func (l resList) String() string {
	return [...]string{"add", "held", "rem", "orphan"}[l]
}

// resKey identifies a resource host-wide: lockspace name and resource
// name (48-byte compares; names are already cut to 48 by the decoder).
type resKey struct{ space, name string }

// resource is one (lockspace, resource) pair this host is acquiring,
// holds, releases or keeps as an orphan: sanlock's struct resource.
type resource struct {
	key    resKey
	id     uint32
	list   resList // under Resources.mu
	tokens []*token
	pid    int // EX holder (orphan: the pid that held it); 0 for SH
	shared bool

	host     *paxos.Host // the lockspace membership it was acquired in
	disks    []wire.Disk
	restrict uint32
	killpath string
	killargs string

	spaceDead  bool // release without disk I/O
	releasing  bool // a background release is running
	examining  bool // an examine is running
	examineReq bool // examine again when the running one ends
	converting bool // a convert is running (other acquires get -EBUSY)

	// opMu serialises the disk operations on held (convert, release,
	// examine reads, LVB access); it is never taken with Resources.mu.
	opMu sync.Mutex
	held *paxos.Held // nil while on add
	devs []diskfmt.Device
}

// token is one client's hold on one resource (docs/paxos.md "Tokens and resources").
type token struct {
	id     uint32
	r      *resource
	client ClientID
	pid    int
	res    wire.Resource // as requested, with its disks
	lver   uint64        // the lver inquire reports (EX)
	flags  uint32        // res.Flags at acquire (SHARED, PERSISTENT, ...)
}

func (t *token) shared() bool { return t.flags&wire.ResShared != 0 }

// leaseClient is the lease state of a registered client, keyed by its
// ClientID in Resources.leases.
type leaseClient struct {
	id     ClientID
	tokens []*token
	busy   bool // a W-reg command targets this client
	dead   bool // the connection ended while busy
}

// Resources is the resource side of the manager: the resource leases of
// registered clients on top of the paxos package (docs/paxos.md). Its
// mutex guards the lists, tokens and client lease sets and is never held
// across disk I/O; acquires of different resources run in parallel, and a
// slow disk only delays the commands on the resources it backs.
type Resources struct {
	cfg    *Setup    // shared with Lockspaces, defaults applied
	spaces spaceView // the lockspace side, wired by New
	// clients is the client registry (pid, name, restrict flags, kill
	// program), wired by New; Resources.mu may be held when it is used.
	clients *ClientRegistry
	disks   *diskCache // one open per resource disk path, shared by its leases

	mu        sync.Mutex
	res       map[resKey]*resource
	leases    map[ClientID]*leaseClient
	lastResID uint32
	lastTokID uint32
	stopped   bool

	wg sync.WaitGroup // background releases and examines
}

var _ LockspaceUsage = (*Resources)(nil)

// spaceView is what the resource side needs from the lockspaces
// (Lockspaces implements it; New wires it).
type spaceView interface {
	// PaxosHost is our membership of a joined lockspace, or -ENOSPC.
	PaxosHost(name string) (*paxos.Host, error)
	// RequestHost sets hostID's request bit in our renewals.
	RequestHost(name string, hostID uint64) error
}

// newResources returns an empty resource table.
func newResources(cfg *Setup) *Resources {
	return &Resources{cfg: cfg, res: make(map[resKey]*resource), leases: make(map[ClientID]*leaseClient),
		clients: cfg.Clients, disks: newDiskCache(cfg.Open)}
}

// wait stops the background work and waits for it (Server.Stop, after the
// server context was cancelled).
func (m *Resources) wait() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Resources) lg() *zap.Logger { return m.cfg.Log }

// rlog is the logger of resource r's lines ("r<id> " before the message).
func (m *Resources) rlog(r *resource) *zap.Logger {
	return m.lg().With(sanlog.Prefix(fmt.Sprintf("r%d ", r.id)))
}

func (m *Resources) baseContext() context.Context { return m.cfg.Context }

// spaceHost returns our membership of lockspace name, or -ENOSPC.
func (m *Resources) spaceHost(name string) (*paxos.Host, error) {
	if m.spaces == nil {
		return nil, causeErr(rescode.ErrENOSPC, "lockspace "+name+" is not joined")
	}
	h, err := m.spaces.PaxosHost(name)
	if err != nil {
		return nil, withCause(err, "lockspace "+name+" is not joined")
	}
	return h, nil
}

// forget drops the lease state of a dead client. Called with m.mu.
func (m *Resources) forget(lc *leaseClient) {
	if m.leases[lc.id] == lc {
		delete(m.leases, lc.id)
	}
}

// openErr is the result of a failed disk open: -errno (sanlock answers
// -2 for a missing path), -ENODEV when there is no errno.
func openErr(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return rescode.Code(-int(en))
	}
	return rescode.ErrENODEV
}

// openResDisks opens every disk of a resource through the shared cache (one
// descriptor per path, however many leases use it); on failure the ones
// opened are closed again and the open's result is returned.
func (m *Resources) openResDisks(disks []wire.Disk) ([]diskfmt.Device, []paxos.Disk, error) {
	devs := make([]diskfmt.Device, 0, len(disks))
	pd := make([]paxos.Disk, 0, len(disks))
	for _, d := range disks {
		dev, err := m.disks.get(d.Path)
		if err != nil {
			m.lg().Info("open error", diskField(d.Path, d.Offset), causeField(err, 0))
			closeDevs(devs)
			return nil, nil, openErr(err)
		}
		devs = append(devs, dev)
		pd = append(pd, paxos.Disk{Dev: dev, Offset: int64(d.Offset)})
	}
	return devs, pd, nil
}

func closeDevs(devs []diskfmt.Device) {
	for _, d := range devs {
		_ = d.Close()
	}
}

// --- acquire ---------------------------------------------------------------

// acquireToken runs the local checks of docs/paxos.md "Local checks" for t and, when they
// call for it, the disk acquire, whose writes ask guard (nil: none). On
// success t is attached to its resource.
func (m *Resources) acquireToken(ctx context.Context, t *token, host *paxos.Host, cmdFlags uint32, guard paxos.WriteGuard) error {
	key := resKey{t.res.LockspaceName, t.res.Name}
	shared := t.shared()

	m.mu.Lock()
	r := m.res[key]
	var st paxos.LocalState
	if r != nil {
		st = paxos.LocalState{
			OnRem: r.list == resRem, OnAdd: r.list == resAdd || r.converting,
			Held: r.list == resHeld, HeldShared: r.list == resHeld && r.shared,
			Orphan: r.list == resOrphan, OrphanShared: r.list == resOrphan && r.shared,
		}
	}
	action, code := paxos.CheckLocal(st, shared, cmdFlags)
	switch action {
	case paxos.LocalFail:
		cause := localCause(r)
		m.mu.Unlock()
		return withCause(code, cause)
	case paxos.LocalJoin:
		t.r = r
		r.tokens = append(r.tokens, t)
		m.mu.Unlock()
		return nil
	case paxos.LocalAdopt:
		t.r = r
		r.tokens = append(r.tokens, t)
		r.list = resHeld
		if !r.shared {
			r.pid = t.pid
			t.lver = r.held.Leader.Lver
		}
		m.mu.Unlock()
		m.rlog(r).Info("adopt orphan", spaceField(key.space), resField(key.name), zap.Int("pid", t.pid))
		return nil
	}
	m.lastResID++
	r = &resource{key: key, id: m.lastResID, list: resAdd, shared: shared, host: host,
		disks: t.res.Disks, tokens: []*token{t}}
	cs, _ := m.clients.Status(t.client)
	if !shared {
		r.pid = t.pid
		r.restrict = cs.Restrict & (wire.RestrictSigkill | wire.RestrictSigterm)
	}
	r.killpath, r.killargs = cs.KillPath, cs.KillArgs
	t.r = r
	m.res[key] = r
	m.mu.Unlock()

	devs, disks, err := m.openResDisks(t.res.Disks)
	if err != nil {
		m.freeResource(r)
		m.rlog(r).Info("acquire error: cannot open the disk", spaceField(key.space), resField(key.name),
			resultField(err), disksField(t.res.Disks))
		return err
	}
	lease := &paxos.Lease{Host: host, Name: key.name, Disks: disks}
	req := paxos.AcquireRequest{
		Shared:      shared,
		OwnerNowait: cmdFlags&wire.AcquireOwnerNowait != 0,
		LVB:         cmdFlags&wire.AcquireLVB != 0,
		Guard:       guard,
	}
	if t.res.Flags&wire.ResLVer != 0 {
		req.Lver = t.res.LVer
	}
	if t.res.Flags&wire.ResNumHosts != 0 {
		req.NumHosts = uint64(t.res.Data32)
	}
	held, err := lease.Acquire(ctx, req)
	if err != nil {
		closeDevs(devs)
		m.freeResource(r)
		m.rlog(r).Info("acquire error", spaceField(key.space), resField(key.name), resultField(err),
			disksField(t.res.Disks), causeField(err, hostIOTimeout(host)))
		return err
	}
	m.mu.Lock()
	r.held, r.devs = held, devs
	r.list = resHeld
	if !shared {
		t.lver = held.Lver()
	}
	m.mu.Unlock()
	return nil
}

// freeResource drops r from the host-wide table (no I/O).
func (m *Resources) freeResource(r *resource) {
	m.mu.Lock()
	if m.res[r.key] == r {
		delete(m.res, r.key)
	}
	m.mu.Unlock()
}

// --- release ---------------------------------------------------------------

// detach removes t from its resource. It returns the resource when t was
// its last token (r is then on rem and the caller releases it), and -201
// when an EX resource still has tokens (quirk Q4, not reachable here since
// we refuse that convert).
func (m *Resources) detachLocked(t *token) (last *resource, err error) {
	r := t.r
	if i := slices.Index(r.tokens, t); i >= 0 {
		r.tokens = slices.Delete(r.tokens, i, i+1)
	}
	if len(r.tokens) > 0 {
		if r.shared {
			return nil, nil
		}
		return nil, rescode.ErrGeneric
	}
	r.list = resRem
	return r, nil
}

// releaseToken releases one token as a RELEASE command does (docs/paxos.md "Releasing a token"):
// the last token of a resource does the on-disk release at once; a timeout
// leaves it to the background retry and returns -202.
func (m *Resources) releaseToken(ctx context.Context, t *token, rename string, noDisk bool) error {
	m.mu.Lock()
	r, err := m.detachLocked(t)
	m.mu.Unlock()
	if r == nil {
		return err
	}
	if noDisk {
		// RELEASE NO_DISK: the lease leaves this host's tables, its
		// leader stays owned by this host on disk (docs/paxos.md
		// "Release command").
		m.finish(r)
		return nil
	}
	return m.releaseResource(ctx, r, rename, false)
}

// releaseResource does the on-disk release of r (on rem). async says the
// caller is the background path (client death, orphans): a timeout is
// then retried here.
func (m *Resources) releaseResource(ctx context.Context, r *resource, rename string, async bool) error {
	m.mu.Lock()
	dead := r.spaceDead
	m.mu.Unlock()
	if dead || r.held == nil {
		m.finish(r)
		return nil
	}
	if gone := m.disksGone(r); gone != nil {
		// 3.8.5 opens the disks again to release; when a lease file was
		// removed while held (virt-sanlock-cleanup does it) that open
		// fails, the token is dropped and the release answers -errno,
		// with nothing written. Do the same, and say so in the log.
		code := rescode.CodeOf(gone)
		m.rlog(r).Info(fmt.Sprintf("release_token open error %d", code), spaceField(r.key.space),
			resField(r.key.name), disksField(r.disks))
		m.rlog(r).Info(fmt.Sprintf("release_token error %d r_flags 0", code), spaceField(r.key.space),
			resField(r.key.name))
		m.finish(r)
		return gone
	}
	r.opMu.Lock()
	err := r.held.Release(ctx, paxos.ReleaseOptions{Rename: rename})
	r.opMu.Unlock()
	code := rescode.CodeOf(err)
	if code == rescode.ErrAIOTimeout && !async {
		m.rlog(r).Info("release timeout, retrying in the background", spaceField(r.key.space), resField(r.key.name),
			disksField(r.disks), causeField(err, hostIOTimeout(r.host)))
		m.releaseLater(r)
		return err
	}
	if code == rescode.ErrAIOTimeout {
		return err // the caller's loop retries
	}
	if err != nil {
		m.rlog(r).Info("release error", spaceField(r.key.space), resField(r.key.name), resultField(err),
			disksField(r.disks), causeField(err, hostIOTimeout(r.host)))
	}
	m.finish(r)
	return err
}

// disksGone checks that every disk path of r still names a file, as the
// open of 3.8.5's release would; it returns the open's result (-ENOENT for
// a removed file) or nil.
func (m *Resources) disksGone(r *resource) error {
	for _, d := range r.disks {
		if _, err := os.Stat(d.Path); err != nil {
			cause := err
			if pe, ok := err.(*os.PathError); ok {
				cause = pe.Err
			}
			m.lg().Info("open error -1", diskField(d.Path, d.Offset), causeField(cause, 0), zap.String("release_of", r.key.space+":"+r.key.name))
			return openErr(err)
		}
	}
	return nil
}

// finish frees a released resource and closes its disks.
func (m *Resources) finish(r *resource) {
	m.freeResource(r)
	r.opMu.Lock()
	closeDevs(r.devs)
	r.devs = nil
	r.opMu.Unlock()
}

// releaseLater releases r (on rem) in the background, retrying timeouts:
// at once, then every 2*io_timeout, until it succeeds, fails otherwise,
// or the lockspace is gone or dying (docs/paxos.md "Releasing a token" step 6).
func (m *Resources) releaseLater(r *resource) {
	m.mu.Lock()
	if r.releasing || m.stopped {
		m.mu.Unlock()
		return
	}
	r.releasing = true
	m.wg.Add(1)
	m.mu.Unlock()
	m.cfg.spawn(func() {
		defer m.wg.Done()
		ctx := m.baseContext()
		for {
			err := m.releaseResource(ctx, r, "", true)
			if rescode.CodeOf(err) != rescode.ErrAIOTimeout {
				return
			}
			if h, herr := m.spaceHost(r.key.space); herr != nil || h != r.host {
				m.rlog(r).Info("release given up: lockspace gone", spaceField(r.key.space), resField(r.key.name), disksField(r.disks))
				m.finish(r)
				return
			}
			wait := 2 * time.Duration(r.host.IOTimeout) * time.Second
			if m.cfg.Clock.Sleep(ctx, wait) != nil {
				return
			}
		}
	})
}
