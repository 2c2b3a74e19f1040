package daemon

import (
	"context"
	"slices"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
)

// registerHandlers installs the resource commands (docs/protocol.md "Commands" #7–#11,
// #14, #17, #25–#27).
func (m *Resources) registerHandlers(s *Server) {
	s.Handle(client.CmdAcquire, ClassWork, m.cmdAcquire)
	s.Handle(client.CmdRelease, ClassWork, m.regCmd(m.release))
	s.Handle(client.CmdInquire, ClassWork, m.cmdInquire)
	s.Handle(client.CmdConvert, ClassWork, m.regCmd(m.convert))
	s.Handle(client.CmdKillpath, ClassWork, m.cmdKillpath)
	s.Handle(client.CmdRequest, ClassWork, m.cmdRequest)
	s.Handle(client.CmdExamineResource, ClassWork, m.cmdExamineResource)
	s.Handle(client.CmdSetLVB, ClassWork, m.cmdSetLVB)
	s.Handle(client.CmdGetLVB, ClassWork, m.cmdGetLVB)
}

// selfPid is header.data2 = -1: the client registered on this connection.
const selfPid = 0xffffffff

// target resolves the registered client a W-reg command acts on (docs/protocol.md
// "Dispatch classes", "Commands") and marks it busy: one such command at a time per client.
// Every successful call must be paired with done.
func (m *Resources) target(c *Conn, q *client.Request, acquire bool) (*Conn, int32) {
	t := c
	if q.Header.Data2 == selfPid {
		if !c.Registered() {
			return nil, client.RvEBUSY
		}
	} else if t = m.srv.FindClient(int(int32(q.Header.Data2))); t == nil {
		return nil, client.RvESRCH
	}
	t.mu.Lock()
	dead, killing := t.pidDead, t.killCount > 0
	t.mu.Unlock()
	switch {
	case dead:
		return nil, client.RvESTALE
	case acquire && killing:
		return nil, client.RvEBUSY
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.lease == nil {
		t.lease = &leaseClient{}
	}
	if t.lease.busy || t.lease.dead {
		return nil, client.RvEBUSY
	}
	t.lease.busy = true
	return t, 0
}

// done ends a W-reg command on t. If t died meanwhile, its remaining
// tokens are dropped as on death; done reports that.
func (m *Resources) done(t *Conn) bool {
	m.mu.Lock()
	lc := t.lease
	lc.busy = false
	var toks []*token
	dead := lc.dead
	if dead {
		toks, lc.tokens = lc.tokens, nil
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

// cmdAcquire is ACQUIRE (docs/paxos.md "Acquire command").
func (m *Resources) cmdAcquire(ctx context.Context, c *Conn, q *client.Request) error {
	t, code := m.target(c, q, true)
	if code == 0 {
		code = m.acquire(ctx, t, q)
	}
	return c.Reply(q, code)
}

func (m *Resources) acquire(ctx context.Context, t *Conn, q *client.Request) int32 {
	name := ""
	if q.Options != nil {
		name = q.Options.OwnerName
	}
	t.SetName(name)
	pid := t.Pid()

	hosts := make([]*paxos.Host, len(q.Resources))
	for i := range q.Resources {
		h, code := m.paxosHost(q.Resources[i].LockspaceName)
		if code != 0 {
			m.done(t)
			return code
		}
		hosts[i] = h
	}
	var got []*token
	undo := func() {
		for _, tk := range got {
			m.releaseToken(ctx, tk, "")
		}
	}
	for i := range q.Resources {
		m.mu.Lock()
		m.lastTokID++
		tk := &token{id: m.lastTokID, cl: t, pid: pid, res: q.Resources[i], flags: q.Resources[i].Flags}
		m.mu.Unlock()
		if code := m.acquireToken(ctx, tk, hosts[i], q.Header.CmdFlags); code != 0 {
			undo()
			m.done(t)
			return code
		}
		got = append(got, tk)
	}
	// The lockspaces must still be the ones we acquired in.
	for i := range q.Resources {
		if h, _ := m.paxosHost(q.Resources[i].LockspaceName); h != hosts[i] {
			undo()
			m.done(t)
			return client.RvENOSPC
		}
	}
	m.mu.Lock()
	lc := t.lease
	if lc.dead {
		m.mu.Unlock()
		undo()
		m.done(t)
		return client.RvENOTTY
	}
	lc.tokens = append(lc.tokens, got...)
	m.mu.Unlock()
	if m.done(t) {
		return client.RvENOTTY
	}
	return 0
}

// regCmd is a W-reg command whose reply is a result: resolve and mark the
// target client, run fn, end the command, reply.
func (m *Resources) regCmd(fn func(context.Context, *Conn, *client.Request) int32) Handler {
	return func(ctx context.Context, c *Conn, q *client.Request) error {
		t, code := m.target(c, q, false)
		if code == 0 {
			code = fn(ctx, t, q)
			m.done(t)
		}
		return c.Reply(q, code)
	}
}

// release is RELEASE (docs/paxos.md "Release command").
func (m *Resources) release(ctx context.Context, t *Conn, q *client.Request) int32 {
	flags := q.Header.CmdFlags
	if flags&client.RelOrphan != 0 {
		if len(q.Resources) == 0 {
			return client.RvEINVAL
		}
		return m.releaseOrphans(q.Resources[0].LockspaceName, q.Resources[0].Name)
	}
	var result int32
	var work []*token
	rename := ""
	m.mu.Lock()
	lc := t.lease
	if flags&client.RelAll != 0 {
		work, lc.tokens = lc.tokens, nil
	} else {
		list := q.Resources
		if flags&client.RelRename != 0 && len(list) > 0 {
			if len(list) > 1 {
				rename = list[1].Name
			}
			list = list[:1]
		}
		for _, res := range list {
			i, tk := findToken(lc, res.LockspaceName, res.Name)
			if tk == nil {
				result = client.RvEPERM
				continue
			}
			lc.tokens = slices.Delete(lc.tokens, i, i+1)
			work = append(work, tk)
		}
	}
	m.mu.Unlock()
	for _, tk := range work {
		if code := m.releaseToken(ctx, tk, rename); code != 0 {
			result = code
		}
	}
	m.mu.Lock()
	empty := len(lc.tokens) == 0
	m.mu.Unlock()
	if empty {
		t.mu.Lock()
		t.killCount, t.killLast = 0, 0
		t.mu.Unlock()
	}
	return result
}

// releaseOrphans moves the orphans of space named name (all of them for
// an empty name) to rem for a background release; the result is their
// number (docs/paxos.md "Release command").
func (m *Resources) releaseOrphans(space, name string) int32 {
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
	return int32(len(rs))
}

// cmdInquire is INQUIRE (docs/protocol.md "Commands" #9, docs/paxos.md "inquire").
func (m *Resources) cmdInquire(_ context.Context, c *Conn, q *client.Request) error {
	h := q.Header
	h.Version, h.Length, h.Data, h.Data2 = client.ProtoVersion, client.HeaderSize, 0, 0
	t, code := m.target(c, q, false)
	if code != 0 {
		h.Data = uint32(code)
		return c.write(h.Bytes())
	}
	m.mu.Lock()
	list := make([]client.Resource, 0, len(t.lease.tokens))
	for _, tk := range t.lease.tokens {
		res := client.Resource{LockspaceName: tk.r.key.space, Name: tk.r.key.name, LVer: tk.lver}
		for _, d := range tk.res.Disks {
			res.Disks = append(res.Disks, client.Disk{Path: d.Path, Offset: d.Offset})
		}
		if tk.r.shared {
			res.Flags |= client.ResShared
		}
		list = append(list, res)
	}
	m.mu.Unlock()
	m.done(t)
	if len(list) == 0 {
		return c.write(h.Bytes())
	}
	h.Data2 = uint32(len(list))
	state, err := client.FormatState(list)
	if err != nil {
		h.Data, h.Length = uint32(client.ErrorCode(err)), client.HeaderSize+1
		return c.write(append(h.Bytes(), 0))
	}
	h.Length = uint32(client.HeaderSize + len(state) + 1)
	b := append(h.Bytes(), state...)
	return c.write(append(b, 0))
}

// convert is CONVERT (docs/paxos.md "Convert"). Converting a shared resource that
// other local pids also hold to exclusive is refused with -EBUSY (3.8.5
// converts it and leaves their tokens attached: quirk Q4).
func (m *Resources) convert(ctx context.Context, t *Conn, q *client.Request) int32 {
	if len(q.Resources) == 0 {
		return client.RvEINVAL
	}
	res := q.Resources[0]
	toShared := res.Flags&client.ResShared != 0
	m.mu.Lock()
	_, tk := findToken(t.lease, res.LockspaceName, res.Name)
	if tk == nil || tk.r.list != resHeld || tk.r.held == nil {
		m.mu.Unlock()
		return client.RvENOENT
	}
	r := tk.r
	switch {
	case r.shared == toShared:
		m.mu.Unlock()
		return client.RvEALREADY
	case !r.shared && len(r.tokens) != 1:
		m.mu.Unlock()
		return client.RvEINVAL
	case r.shared && len(r.tokens) != 1:
		m.mu.Unlock()
		return client.RvEBUSY
	case r.converting:
		m.mu.Unlock()
		return client.RvEBUSY
	}
	r.converting = true
	m.mu.Unlock()

	r.opMu.Lock()
	err := r.held.Convert(ctx, toShared, q.Header.CmdFlags&client.ConvertOwnerNowait != 0)
	lver := r.held.Lver()
	r.opMu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	r.converting = false
	if err != nil {
		return rv(err)
	}
	r.shared = toShared
	if toShared {
		r.pid, r.restrict = 0, 0
		tk.flags |= client.ResShared
		tk.lver = 0
	} else {
		r.pid = tk.pid
		r.restrict = t.Restricted() & (client.RestrictSigkill | client.RestrictSigterm)
		tk.flags &^= client.ResShared
		tk.lver = lver
	}
	return 0
}

// cmdKillpath is KILLPATH: the client's kill program and its arguments
// (docs/protocol.md "Commands" #17, "Kill program").
func (m *Resources) cmdKillpath(_ context.Context, c *Conn, q *client.Request) error {
	t, code := m.target(c, q, false)
	if code != 0 {
		return c.Reply(q, code)
	}
	var kp client.Killpath
	if q.Killpath != nil {
		kp = *q.Killpath
	}
	t.mu.Lock()
	t.killPath, t.killArgs = kp.Path, kp.Args
	t.flags = t.flags&^client.KillpathPID | q.Header.CmdFlags&client.KillpathPID
	t.mu.Unlock()
	m.done(t)
	return c.Reply(q, 0)
}

// cmdRequest is REQUEST (docs/paxos.md "Request").
func (m *Resources) cmdRequest(ctx context.Context, c *Conn, q *client.Request) error {
	if len(q.Resources) == 0 {
		return c.Reply(q, client.RvEINVAL)
	}
	res := q.Resources[0]
	host, code := m.paxosHost(res.LockspaceName)
	if code != 0 {
		return c.Reply(q, code)
	}
	devs, disks, code := m.openDisks(res.Disks)
	if code != 0 {
		return c.Reply(q, code)
	}
	defer closeDevs(devs)
	lease := &paxos.Lease{Host: host, Name: res.Name, Disks: disks}
	out, err := lease.Request(ctx, res.LVer, q.Header.Data, q.Header.CmdFlags&client.RequestNextLVer != 0)
	if err == nil && out.Written && out.Owner != 0 {
		if ls := m.lockspaces(); ls != nil {
			ls.RequestHost(res.LockspaceName, out.Owner)
		}
	}
	return c.Reply(q, rv(err))
}

// cmdExamineResource is EXAMINE_RESOURCE: examine our held resource(s) of
// that name; the result is always 0 (docs/protocol.md "Commands" #14).
func (m *Resources) cmdExamineResource(_ context.Context, c *Conn, q *client.Request) error {
	if len(q.Resources) > 0 {
		m.examine(q.Resources[0].LockspaceName, q.Resources[0].Name)
	}
	return c.Reply(q, 0)
}

// heldResource finds a resource on the held list (SET_LVB, GET_LVB).
func (m *Resources) heldResource(q *client.Request) *resource {
	if len(q.Resources) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.res[resKey{q.Resources[0].LockspaceName, q.Resources[0].Name}]
	if r == nil || r.list != resHeld || r.held == nil {
		return nil
	}
	return r
}

// cmdSetLVB is SET_LVB (docs/paxos.md "LVB"): no I/O.
func (m *Resources) cmdSetLVB(_ context.Context, c *Conn, q *client.Request) error {
	r := m.heldResource(q)
	if r == nil {
		return c.Reply(q, client.RvENOENT)
	}
	r.opMu.Lock()
	err := error(diskfmt.ErrENOENT)
	if r.held != nil {
		err = r.held.SetLVB(q.LVB)
	}
	r.opMu.Unlock()
	return c.Reply(q, rv(err))
}

// cmdGetLVB is GET_LVB (docs/paxos.md "LVB", docs/protocol.md "Commands" #26): the in-memory LVB,
// at most one sector.
func (m *Resources) cmdGetLVB(_ context.Context, c *Conn, q *client.Request) error {
	h := q.Header
	h.Version, h.Data2 = client.ProtoVersion, 0
	fail := func(code int32) error {
		h.Data, h.Length = uint32(code), client.HeaderSize+q.Header.Data2
		return c.write(h.Bytes())
	}
	r := m.heldResource(q)
	if r == nil {
		return fail(client.RvENOENT)
	}
	r.opMu.Lock()
	var b []byte
	err := error(diskfmt.ErrENOENT)
	if r.held != nil {
		b, err = r.held.LVB(int(q.Header.Data2))
	}
	r.opMu.Unlock()
	if err != nil {
		return fail(rv(err))
	}
	h.Data, h.Length = 0, uint32(client.HeaderSize+len(b))
	return c.write(append(h.Bytes(), b...))
}
