package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// begin marks the lease state of client id busy: one W-reg command at a
// time per client (docs/protocol.md "Dispatch classes"). Every successful
// call must be paired with done.
func (m *Resources) begin(id ClientID) (*leaseClient, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lc := m.leases[id]
	if lc == nil {
		lc = &leaseClient{id: id}
		m.leases[id] = lc
	}
	if lc.busy || lc.dead {
		return nil, causeErr(rescode.ErrEBUSY, "another command of this client is still running")
	}
	lc.busy = true
	return lc, nil
}

// done ends a W-reg command on t. If t died meanwhile, its remaining
// tokens are dropped as on death; done reports that.
func (m *Resources) done(lc *leaseClient) bool {
	m.mu.Lock()
	lc.busy = false
	var toks []*token
	dead := lc.dead
	if dead {
		toks, lc.tokens = lc.tokens, nil
		m.forget(lc)
	}
	m.mu.Unlock()
	if dead {
		m.dropTokens(toks)
	}
	return dead
}

// findToken returns t's token for lockspace space and resource name.
// Called with m.mu.
func findToken(lc *leaseClient, space, name string) (int, *token) {
	for i, tk := range lc.tokens {
		if tk.r.key.space == space && tk.r.key.name == name {
			return i, tk
		}
	}
	return -1, nil
}

// AcquireRequest is ACQUIRE (docs/paxos.md "Acquire command").
type AcquireRequest struct {
	Resources []wire.Resource
	Flags     uint32 // client.Acquire* command flags
	OwnerName string // the client record's new name

	// Guard, if set, is asked before each paxos write of the acquire
	// (paxos.WriteGuard): a handed-over request is cancellable only until
	// its first write.
	Guard paxos.WriteGuard
}

// Acquire acquires req.Resources for client id, all or none.
func (m *Resources) Acquire(ctx context.Context, id ClientID, req AcquireRequest) error {
	lc, err := m.begin(id)
	if err == nil {
		err = m.acquire(ctx, lc, req)
	}
	return resultErr(m.explain(err))
}

// HeldError is ACQUIRE2's answer when a lease is held by a live host
// (-243) or by a host whose lease has no timeout (-249): the owner as
// this host sees it (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
type HeldError struct {
	Code rescode.Code
	// Owner: the leader's owner host_id, generation and timestamp; Flags
	// is our delta runner's state of that host; IOTimeout 0 (5.1.1's).
	Owner wire.Host
	// OwnerName is the host name in the owner's delta lease as our last
	// renewal read it ("" when not read yet).
	OwnerName string
	// Cause names the holder for a person (see CauseError).
	Cause string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%v (owner host_id %d generation %d)", e.Code, e.Owner.HostID, e.Owner.Generation)
}

// Unwrap returns the Code, so rescode.CodeOf finds it.
func (e *HeldError) Unwrap() error { return e.Code }

// spaceErr is an acquire error of a resource of lockspace space.
type spaceErr struct {
	space string
	err   error
}

func (e *spaceErr) Error() string { return e.err.Error() }
func (e *spaceErr) Unwrap() error { return e.err }

// ownerViewer is the view of other hosts ACQUIRE2 reports (implemented by
// Lockspaces).
type ownerViewer interface {
	OwnerView(space string, hostID uint64) (state uint32, name string)
}

// Acquire2 is ACQUIRE2: Acquire, but a lease held by another host is
// answered with a *HeldError naming its owner.
func (m *Resources) Acquire2(ctx context.Context, id ClientID, req AcquireRequest) error {
	lc, err := m.begin(id)
	if err == nil {
		err = m.acquire(ctx, lc, req)
	}
	code := rescode.CodeOf(err)
	if code != rescode.ErrAcquireIDLive && code != rescode.ErrAcquireOwnedNoTimeout {
		return resultErr(m.explain(err))
	}
	he := &HeldError{Code: code, Cause: Cause(m.explain(err))}
	var pe *paxos.Error
	if errors.As(err, &pe) && pe.Leader != nil {
		ld := pe.Leader
		he.Owner = wire.Host{HostID: ld.OwnerID, Generation: ld.OwnerGeneration, Timestamp: ld.Timestamp}
		if v, ok := m.spaces.(ownerViewer); ok {
			var se *spaceErr
			if errors.As(err, &se) {
				he.Owner.Flags, he.OwnerName = v.OwnerView(se.space, ld.OwnerID)
			}
		}
	}
	return he
}

func (m *Resources) acquire(ctx context.Context, lc *leaseClient, q AcquireRequest) error {
	m.clients.SetName(lc.id, q.OwnerName)
	cs, _ := m.clients.Status(lc.id)
	pid := cs.Pid

	hosts := make([]*paxos.Host, len(q.Resources))
	for i := range q.Resources {
		h, err := m.spaceHost(q.Resources[i].LockspaceName)
		if err != nil {
			m.done(lc)
			return err
		}
		hosts[i] = h
	}
	var got []*token
	undo := func() {
		for _, tk := range got {
			m.releaseToken(ctx, tk, "", false)
		}
	}
	for i := range q.Resources {
		m.mu.Lock()
		m.lastTokID++
		tk := &token{id: m.lastTokID, client: lc.id, pid: pid, res: q.Resources[i], flags: q.Resources[i].Flags}
		m.mu.Unlock()
		if err := m.acquireToken(ctx, tk, hosts[i], q.Flags, q.Guard); err != nil {
			undo()
			m.done(lc)
			return &spaceErr{space: q.Resources[i].LockspaceName, err: err}
		}
		got = append(got, tk)
	}
	// The lockspaces must still be the ones we acquired in.
	for i := range q.Resources {
		if h, _ := m.spaceHost(q.Resources[i].LockspaceName); h != hosts[i] {
			undo()
			m.done(lc)
			return rescode.ErrENOSPC
		}
	}
	m.mu.Lock()
	if lc.dead {
		m.mu.Unlock()
		undo()
		m.done(lc)
		return rescode.ErrENOTTY
	}
	lc.tokens = append(lc.tokens, got...)
	m.mu.Unlock()
	if m.done(lc) {
		return rescode.ErrENOTTY
	}
	return nil
}

// SetKillpath is KILLPATH (docs/protocol.md "Kill program"): a W-reg
// command of client id that sets its kill program, its arguments and,
// of flags, wire.KillpathPID.
func (m *Resources) SetKillpath(id ClientID, path, args string, flags uint32) error {
	lc, err := m.begin(id)
	if err != nil {
		return err
	}
	m.clients.SetKillpath(id, path, args, flags)
	m.done(lc)
	return nil
}

// ReleaseRequest is RELEASE (docs/paxos.md "Release command").
type ReleaseRequest struct {
	Resources []wire.Resource
	Flags     uint32 // client.Rel* command flags; wire.RelNoDisk leaves the leaders owned on disk
}

// Release releases resources of client id. With wire.RelOrphan n is
// the number of orphans moved to release.
func (m *Resources) Release(ctx context.Context, id ClientID, req ReleaseRequest) (n int, err error) {
	lc, err := m.begin(id)
	if err != nil {
		return 0, err
	}
	n, err = m.release(ctx, lc, req)
	m.done(lc)
	return n, resultErr(err)
}

// release is RELEASE (docs/paxos.md "Release command"); n is the number
// of orphans moved to release with wire.RelOrphan. When several resources
// fail, the error is the last one's.
func (m *Resources) release(ctx context.Context, lc *leaseClient, q ReleaseRequest) (n int, err error) {
	flags := q.Flags
	if flags&wire.RelOrphan != 0 {
		if len(q.Resources) == 0 {
			return 0, rescode.ErrEINVAL
		}
		return m.releaseOrphans(q.Resources[0].LockspaceName, q.Resources[0].Name), nil
	}
	var result error
	var work []*token
	rename := ""
	m.mu.Lock()
	if flags&wire.RelAll != 0 {
		work, lc.tokens = lc.tokens, nil
	} else {
		list := q.Resources
		if flags&wire.RelRename != 0 && len(list) > 0 {
			if len(list) > 1 {
				rename = list[1].Name
			}
			list = list[:1]
		}
		for _, res := range list {
			i, tk := findToken(lc, res.LockspaceName, res.Name)
			if tk == nil {
				result = causeErr(rescode.ErrEPERM, "the process does not hold resource "+res.LockspaceName+":"+res.Name)
				continue
			}
			lc.tokens = slices.Delete(lc.tokens, i, i+1)
			work = append(work, tk)
		}
	}
	m.mu.Unlock()
	for _, tk := range work {
		if err := m.releaseToken(ctx, tk, rename, flags&wire.RelNoDisk != 0); err != nil {
			result = err
		}
	}
	m.mu.Lock()
	empty := len(lc.tokens) == 0
	m.mu.Unlock()
	if empty {
		m.clients.ResetKill(lc.id)
	}
	return 0, result
}

// releaseOrphans moves the orphans of space named name (all of them for
// an empty name) to rem for a background release; the result is their
// number (docs/paxos.md "Release command").
func (m *Resources) releaseOrphans(space, name string) int {
	m.mu.Lock()
	var rs []*resource
	for k, r := range m.res {
		if k.space == space && r.list == resOrphan && (name == "" || k.name == name) {
			r.list = resRem
			rs = append(rs, r)
		}
	}
	m.mu.Unlock()
	for _, r := range rs {
		m.releaseLater(r)
	}
	return len(rs)
}

// Inquire lists the resources client id holds (docs/protocol.md
// "Commands" #9, docs/paxos.md "inquire").
func (m *Resources) Inquire(id ClientID) ([]wire.Resource, error) {
	lc, err := m.begin(id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	list := make([]wire.Resource, 0, len(lc.tokens))
	for _, tk := range lc.tokens {
		res := wire.Resource{LockspaceName: tk.r.key.space, Name: tk.r.key.name, LVer: tk.lver}
		for _, d := range tk.res.Disks {
			res.Disks = append(res.Disks, wire.Disk{Path: d.Path, Offset: d.Offset})
		}
		if tk.r.shared {
			res.Flags |= wire.ResShared
		}
		list = append(list, res)
	}
	m.mu.Unlock()
	m.done(lc)
	return list, nil
}

// ConvertRequest is CONVERT (docs/paxos.md "Convert").
type ConvertRequest struct {
	Resource *wire.Resource // Flags: wire.ResShared for shared; nil: -EINVAL
	Flags    uint32         // wire.ConvertOwnerNowait

	// Guard, if set, is asked before each paxos write of the convert
	// (as AcquireRequest.Guard).
	Guard paxos.WriteGuard
}

// Convert converts a held resource of client id between shared and
// exclusive.
func (m *Resources) Convert(ctx context.Context, id ClientID, req ConvertRequest) error {
	lc, err := m.begin(id)
	if err != nil {
		return err
	}
	err = m.convert(ctx, lc, req)
	m.done(lc)
	return resultErr(err)
}

// convert is CONVERT (docs/paxos.md "Convert"). Converting a shared resource that
// other local pids also hold to exclusive is refused with -EBUSY (3.8.5
// converts it and leaves their tokens attached: quirk Q4).
func (m *Resources) convert(ctx context.Context, lc *leaseClient, q ConvertRequest) error {
	if q.Resource == nil {
		return rescode.ErrEINVAL
	}
	res := *q.Resource
	toShared := res.Flags&wire.ResShared != 0
	m.mu.Lock()
	_, tk := findToken(lc, res.LockspaceName, res.Name)
	if tk == nil || tk.r.list != resHeld || tk.r.held == nil {
		m.mu.Unlock()
		return rescode.ErrENOENT
	}
	r := tk.r
	switch {
	case r.shared == toShared:
		m.mu.Unlock()
		return rescode.ErrEALREADY
	case !r.shared && len(r.tokens) != 1:
		m.mu.Unlock()
		return rescode.ErrEINVAL
	case r.shared && len(r.tokens) != 1:
		m.mu.Unlock()
		return rescode.ErrEBUSY
	case r.converting:
		m.mu.Unlock()
		return rescode.ErrEBUSY
	}
	r.converting = true
	m.mu.Unlock()

	r.opMu.Lock()
	err := r.held.Convert(ctx, paxos.ConvertRequest{Shared: toShared,
		OwnerNowait: q.Flags&wire.ConvertOwnerNowait != 0, Guard: q.Guard})
	lver := r.held.Lver()
	r.opMu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	r.converting = false
	if err != nil {
		return err
	}
	r.shared = toShared
	if toShared {
		r.pid, r.restrict = 0, 0
		tk.flags |= wire.ResShared
		tk.lver = 0
	} else {
		r.pid = tk.pid
		cs, _ := m.clients.Status(lc.id)
		r.restrict = cs.Restrict & (wire.RestrictSigkill | wire.RestrictSigterm)
		tk.flags &^= wire.ResShared
		tk.lver = lver
	}
	return nil
}

// RequestRequest is REQUEST (docs/paxos.md "Request").
type RequestRequest struct {
	Resource wire.Resource
	Force    uint32 // force_mode
	NextLVer bool   // wire.RequestNextLVer
}

// Request writes a request record for a resource held elsewhere and
// notifies its owner.
func (m *Resources) Request(ctx context.Context, q RequestRequest) error {
	res := q.Resource
	host, err := m.spaceHost(res.LockspaceName)
	if err != nil {
		return err
	}
	devs, disks, err := m.openResDisks(res.Disks)
	if err != nil {
		return err
	}
	defer closeDevs(devs)
	lease := &paxos.Lease{Host: host, Name: res.Name, Disks: disks}
	out, err := lease.Request(ctx, res.LVer, q.Force, q.NextLVer)
	if err == nil && out.Written && out.Owner != 0 && m.spaces != nil {
		m.spaces.RequestHost(res.LockspaceName, out.Owner)
	}
	return resultErr(err)
}

// ExamineResource examines our held resource(s) named name in space
// (EXAMINE_RESOURCE, docs/protocol.md "Commands" #14).
func (m *Resources) ExamineResource(space, name string) { m.examine(space, name) }

// heldResource finds a resource on the held list (SET_LVB, GET_LVB).
func (m *Resources) heldResource(space, name string) *resource {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.res[resKey{space, name}]
	if r == nil || r.list != resHeld || r.held == nil {
		return nil
	}
	return r
}

// SetLVB sets the in-memory LVB of held resource space:name (SET_LVB,
// docs/paxos.md "LVB"): no I/O.
func (m *Resources) SetLVB(space, name string, lvb []byte) error {
	r := m.heldResource(space, name)
	if r == nil {
		return rescode.ErrENOENT
	}
	r.opMu.Lock()
	err := error(rescode.ErrENOENT)
	if r.held != nil {
		err = r.held.SetLVB(lvb)
	}
	r.opMu.Unlock()
	return resultErr(err)
}

// GetLVB returns at most n bytes of the in-memory LVB of held resource
// space:name (GET_LVB, docs/protocol.md "Commands" #26).
func (m *Resources) GetLVB(space, name string, n int) ([]byte, error) {
	r := m.heldResource(space, name)
	if r == nil {
		return nil, rescode.ErrENOENT
	}
	r.opMu.Lock()
	var b []byte
	err := error(rescode.ErrENOENT)
	if r.held != nil {
		b, err = r.held.LVB(n)
	}
	r.opMu.Unlock()
	if err != nil {
		return nil, resultErr(err)
	}
	return b, nil
}
