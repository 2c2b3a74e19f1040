package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/paxos"
)

// diskCmds serves the resource-area commands that work on disk without a
// client's lease set (docs/protocol.md "Commands" #19, #21, #24, #35–#40).
type diskCmds struct {
	s *Server

	mu   sync.Mutex
	busy map[string]bool // lockspaces with an rindex operation running
}

// registerDiskCmds installs the resource-area commands that work on disk
// without a client's lease set: WRITE_RESOURCE, READ_RESOURCE,
// READ_RESOURCE_OWNERS and the rindex commands (FORMAT, REBUILD, UPDATE,
// LOOKUP, CREATE_RESOURCE, DELETE_RESOURCE).
func (s *Server) registerDiskCmds() {
	d := &diskCmds{s: s, busy: make(map[string]bool)}
	s.Handle(client.CmdWriteResource, ClassWork, d.writeResource)
	s.Handle(client.CmdReadResource, ClassWork, d.readResource)
	s.Handle(client.CmdReadResourceOwners, ClassWork, d.readResourceOwners)
	s.Handle(client.CmdFormatRIndex, ClassWork, d.formatRindex)
	s.Handle(client.CmdRebuildRIndex, ClassWork, d.rebuildRindex)
	s.Handle(client.CmdUpdateRIndex, ClassWork, d.rindexEntryCmd(d.updateRindex))
	s.Handle(client.CmdLookupRIndex, ClassWork, d.rindexEntryCmd(d.lookupRindex))
	s.Handle(client.CmdCreateResource, ClassWork, d.rindexEntryCmd(d.createResource))
	s.Handle(client.CmdDeleteResource, ClassWork, d.rindexEntryCmd(d.deleteResource))
}

// sizeFlagBits are the ALIGN/SECTOR bits of resource and rindex flags.
const sizeFlagBits = diskfmt.FlagSector512 | diskfmt.FlagSector4K | diskfmt.FlagAlign1M |
	diskfmt.FlagAlign2M | diskfmt.FlagAlign4M | diskfmt.FlagAlign8M

// openRaw opens a lease disk with the lockspace manager's opener when
// there is one (so tests can inject devices). An open failure is returned
// as its -errno result (sanlock logs "open error -2 <path>").
func (d *diskCmds) openRaw(path string) (diskfmt.Device, int32) {
	open := func(p string) (diskfmt.Device, error) { return diskfmt.OpenFile(p) }
	if mg := d.s.deps.Manager; mg != nil {
		open = mg.Lockspaces.Open
	}
	dev, err := open(path)
	if err != nil {
		rv := int32(diskfmt.CodeOf(err))
		d.s.lg.Error(fmt.Sprintf("open error %d %s: %s", rv, path, manager.CauseLog(err, 0)))
		if rv >= 0 {
			rv = client.RvENODEV
		}
		return nil, rv
	}
	return dev, 0
}

// bound gives every single I/O on dev a deadline of ioTimeout seconds (the
// daemon's io_timeout when 0).
func (d *diskCmds) bound(dev diskfmt.Device, ioTimeout int) diskfmt.Device {
	if ioTimeout <= 0 {
		ioTimeout = DefaultIOTimeout
	}
	if ioTimeout <= 0 {
		ioTimeout = DefaultIOTimeout
	}
	return diskfmt.WithIOTimeout(dev, time.Duration(ioTimeout)*time.Second)
}

// open is openRaw plus bound.
func (d *diskCmds) open(path string, ioTimeout int) (diskfmt.Device, int32) {
	dev, rv := d.openRaw(path)
	if rv < 0 {
		return nil, rv
	}
	return d.bound(dev, ioTimeout), 0
}

// openDisks opens every disk of res (sanlock opens them all before any
// I/O, so any missing disk fails the command).
func (d *diskCmds) openDisks(res *client.Resource, ioTimeout int) ([]diskfmt.ResourceDisk, func(), int32) {
	var disks []diskfmt.ResourceDisk
	closeAll := func() {
		for _, dk := range disks {
			_ = dk.Dev.Close()
		}
	}
	if len(res.Disks) == 0 || len(res.Disks) > diskfmt.MaxDisks {
		return nil, closeAll, client.RvERANGE
	}
	for _, dk := range res.Disks {
		dev, rv := d.open(dk.Path, ioTimeout)
		if rv < 0 {
			closeAll()
			return nil, func() {}, rv
		}
		disks = append(disks, diskfmt.ResourceDisk{Dev: dev, Offset: int64(dk.Offset)})
	}
	return disks, closeAll, 0
}

// resourceOf returns the request's resource (with its disks).
func resourceOf(q *client.Request) client.Resource {
	if len(q.Resources) == 0 {
		return client.Resource{}
	}
	return q.Resources[0]
}

// resultOf maps an error to the result sent in a reply.
func resultOf(err error) int32 { return int32(diskfmt.CodeOf(err)) }

// writeResource: WRITE_RESOURCE (docs/protocol.md "Commands" #19). header.data is num_hosts (what
// libsanlock calls max_hosts), data2 is ignored; SANLK_WRITE_CLEAR writes
// an invalidated lease.
func (d *diskCmds) writeResource(ctx context.Context, c *Conn, q *client.Request) error {
	return c.Reply(q, d.doWriteResource(ctx, q))
}

func (d *diskCmds) doWriteResource(ctx context.Context, q *client.Request) int32 {
	res := resourceOf(q)
	disks, closeAll, rv := d.openDisks(&res, d.s.cfg.WriteInitIOTimeout)
	defer closeAll()
	if rv < 0 {
		return rv
	}
	p := diskfmt.PaxosInit{SpaceName: res.LockspaceName, ResourceName: res.Name, NumHosts: uint64(q.Header.Data)}
	if q.Header.CmdFlags&client.WriteClear != 0 {
		p.Clear, p.ClearTime = true, monoSeconds()
	}
	return resultOf(diskfmt.WriteResource(ctx, disks, res.Flags, p))
}

// readResource: READ_RESOURCE (docs/protocol.md "Commands" #21, docs/paxos.md "read_resource"). The
// reply always carries the resource (no disks): on success with the names and lver of
// the leader and its size flags, else as it was sent.
func (d *diskCmds) readResource(ctx context.Context, c *Conn, q *client.Request) error {
	res := resourceOf(q)
	rv := d.doReadResource(ctx, &res)
	h := q.Header
	h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), 0
	h.Length = client.HeaderSize + client.ResourceSize
	res.Disks = nil
	b, err := res.AppendBinary(h.Bytes())
	if err != nil {
		return err
	}
	return c.write(b)
}

func (d *diskCmds) doReadResource(ctx context.Context, res *client.Resource) int32 {
	disks, closeAll, rv := d.openDisks(res, 0)
	defer closeAll()
	if rv < 0 {
		return rv
	}
	dev := &dkReadErrDev{Device: disks[0].Dev}
	ld, flags, err := paxos.ReadResource(ctx, dev, disks[0].Offset, res.LockspaceName, res.Name, res.Flags)
	if err != nil {
		return dkReadResult(dev.err, err)
	}
	res.LockspaceName = diskfmt.NameString(ld.SpaceName[:])
	res.Name = diskfmt.NameString(ld.ResourceName[:])
	res.LVer = ld.Lver
	res.Flags = flags
	return 0
}

// readResourceOwners: READ_RESOURCE_OWNERS (docs/protocol.md "Commands" #24, docs/paxos.md
// "read_resource_owners"). The reply is the resource (lver of the leader; the flags as sent plus
// SHARED when some holder is shared) and one sanlk_host per owner.
func (d *diskCmds) readResourceOwners(ctx context.Context, c *Conn, q *client.Request) error {
	res := resourceOf(q)
	owners, rv := d.doReadResourceOwners(ctx, &res)
	h := q.Header
	h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), uint32(len(owners))
	h.Length = uint32(client.HeaderSize + client.ResourceSize + client.HostSize*len(owners))
	res.Disks = nil
	b, err := res.AppendBinary(h.Bytes())
	if err != nil {
		return err
	}
	for _, o := range owners {
		host := client.Host{HostID: o.HostID, Generation: o.Generation, Timestamp: o.Timestamp}
		if b, err = host.AppendBinary(b); err != nil {
			return err
		}
	}
	return c.write(b)
}

func (d *diskCmds) doReadResourceOwners(ctx context.Context, res *client.Resource) ([]paxos.Owner, int32) {
	disks, closeAll, rv := d.openDisks(res, 0)
	defer closeAll()
	if rv < 0 {
		return nil, rv
	}
	own, err := dkReadOwners(ctx, disks[0].Dev, disks[0].Offset, res)
	if err != nil {
		return nil, resultOf(err)
	}
	res.LVer = own.Lver
	if own.Shared {
		res.Flags |= client.ResShared
	}
	return own.Owners, 0
}

// dkReadOwners reads the owners of the lease at off the way sanlock 3.8.5
// does (checked against it for all five geometries, zeroed and cleared
// leases, and reads past the end of the device): read one area with the
// sizes the caller gave, 512 and its legacy align standing in for missing
// ones; take the sizes recorded in the leader, whatever its magic; a size
// the caller gave that differs is -EINVAL, a guessed one that differs
// makes it read again with the leader's sizes, and a leader without valid
// sizes (a zeroed area) is -EINVAL too. Only then is the leader verified
// (magic, version, names, checksum) and the holders listed
// (paxos.ResourceOwners). A read past the end of the device is -EMSGSIZE.
func dkReadOwners(ctx context.Context, dev diskfmt.Device, off int64, res *client.Resource) (paxos.Owners, error) {
	givenSS, givenAlign := diskfmt.SectorFromFlags(res.Flags), diskfmt.AlignFromFlags(res.Flags)
	ss, align := givenSS, givenAlign
	if ss == 0 {
		ss = diskfmt.SectorSize512
	}
	if align == 0 {
		align = diskfmt.LegacyAlign(ss)
	}
	for pass := 0; ; pass++ {
		if ss <= 0 || align <= 0 || align < ss {
			return paxos.Owners{}, diskfmt.ErrEINVAL
		}
		buf := make([]byte, align)
		if err := dev.ReadAt(ctx, buf, off); err != nil {
			if diskfmt.IsShortRead(err) {
				return paxos.Owners{}, rvEMSGSIZE
			}
			if diskfmt.CodeOf(err) == diskfmt.ErrGeneric {
				return paxos.Owners{}, fmt.Errorf("%w: %w", err, diskfmt.ErrEIO)
			}
			return paxos.Owners{}, err
		}
		ld, _ := diskfmt.DecodeLeader(buf)
		lss, lalign := int(ld.SectorSize), -1
		if g, err := diskfmt.GeometryFromLeader(&ld); err == nil {
			lalign = g.AlignSize
		}
		if lss != ss || lalign != align {
			if (givenSS != 0 && lss != givenSS) || (givenAlign != 0 && lalign != givenAlign) || pass > 0 {
				return paxos.Owners{}, diskfmt.ErrEINVAL
			}
			ss, align = lss, lalign
			continue
		}
		ld, err := diskfmt.VerifyPaxos(buf, res.LockspaceName, res.Name, 0)
		if err != nil {
			return paxos.Owners{}, err
		}
		return paxos.ResourceOwners(buf, &ld, ss), nil
	}
}

// rvEMSGSIZE is what sanlock answers for a read that ends past the end of
// the device.
const rvEMSGSIZE diskfmt.Code = -90

// dkReadErrDev keeps the last read error, which the paxos layer reports
// as a plain I/O error (-5) when it is not a timeout.
type dkReadErrDev struct {
	diskfmt.Device
	err error
}

func (d *dkReadErrDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := d.Device.ReadAt(ctx, p, off)
	if err != nil {
		d.err = err
	}
	return err
}

// dkReadResult is the result sanlock gives for a failed read: -EMSGSIZE
// for a read past the end of the device, the errno of the read (e.g.
// -EINVAL for an O_DIRECT read at an unaligned offset), or else the
// result the paxos layer found.
func dkReadResult(readErr, err error) int32 {
	switch c := diskfmt.CodeOf(readErr); {
	case readErr == nil || c == diskfmt.ErrAIOTimeout:
		return resultOf(err)
	case diskfmt.IsShortRead(readErr):
		return int32(rvEMSGSIZE)
	case c < 0 && c > -200:
		return int32(c)
	}
	return resultOf(err)
}

// formatRindex: FORMAT_RINDEX (docs/protocol.md "Commands" #35, docs/ondisk.md
// "Resource index operations"). No lockspace is needed.
func (d *diskCmds) formatRindex(ctx context.Context, c *Conn, q *client.Request) error {
	rx := rindexOf(q)
	dev, rv := d.open(rx.Disk.Path, d.s.cfg.WriteInitIOTimeout)
	if rv < 0 {
		d.s.lg.Error(fmt.Sprintf("rindex_format open failed %d %s: %s", rv, manager.DiskLog(rx.Disk.Path, rx.Disk.Offset),
			diskfmt.Code(rv).Error()))
		return c.Reply(q, rv)
	}
	defer dev.Close()
	err := diskfmt.FormatRindex(ctx, dev, int64(rx.Disk.Offset), rx.Flags, rx.LockspaceName, rx.MaxResources)
	return c.Reply(q, resultOf(err))
}

func rindexOf(q *client.Request) client.RIndex {
	if q.RIndex == nil {
		return client.RIndex{}
	}
	return *q.RIndex
}

// rindexOp is one rindex operation in progress: the opened index, and,
// unless the caller asked for SANLK_RX_NO_LOCKSPACE, our membership of its
// lockspace (which is then marked busy until done is called).
type rindexOp struct {
	rx   *diskfmt.Rindex
	path string      // the index's disk, for log lines
	host *paxos.Host // nil with SANLK_RX_NO_LOCKSPACE
	done func()
}

// beginRindex opens the rindex disk and, when needLS, checks that the
// lockspace is joined and takes its rindex slot: -ENOENT when not joined,
// -EBUSY when another rindex operation runs on it, -ENOSPC when it is
// failing. Then the header is read (with the lockspace's sector size, 4096
// without one) and verified (-274..-277). Order as sanlock 3.8.5: open,
// lockspace, header.
func (d *diskCmds) beginRindex(ctx context.Context, what string, rxa *client.RIndex, needLS bool) (*rindexOp, int32) {
	op := &rindexOp{}
	dev, rv := d.openRaw(rxa.Disk.Path)
	if rv < 0 {
		d.s.lg.Error(fmt.Sprintf("%s open failed %d %s: %s", what, rv, manager.DiskLog(rxa.Disk.Path, rxa.Disk.Offset),
			diskfmt.Code(rv).Error()))
		return nil, rv
	}
	closeDev := func() { _ = dev.Close() }
	ss, ioTimeout := 0, 0
	op.done = closeDev
	if needLS {
		h, rv := d.paxosHost(rxa.LockspaceName)
		if rv == client.RvENOENT {
			d.s.lg.Error(fmt.Sprintf("%s lockspace not available %d %s: not joined (rindex %s)", what, rv, rxa.LockspaceName,
				manager.DiskLog(rxa.Disk.Path, rxa.Disk.Offset)))
		}
		if rv < 0 {
			closeDev()
			return nil, rv
		}
		if !d.lockRindex(rxa.LockspaceName) {
			closeDev()
			d.s.lg.Error(fmt.Sprintf("%s lockspace %s busy with another rindex op (rindex %s)", what, rxa.LockspaceName,
				manager.DiskLog(rxa.Disk.Path, rxa.Disk.Offset)))
			return nil, client.RvEBUSY
		}
		op.host, ss, ioTimeout = h, h.Geometry.SectorSize, h.IOTimeout
		op.done = func() { d.unlockRindex(rxa.LockspaceName); closeDev() }
	}
	dev = d.bound(dev, ioTimeout)
	rx, err := diskfmt.OpenRindex(ctx, dev, int64(rxa.Disk.Offset), rxa.LockspaceName, ss)
	if err != nil {
		op.done()
		d.s.lg.Error(fmt.Sprintf("%s read of the rindex header error %d lockspace %s disk %s: %s", what, resultOf(err),
			rxa.LockspaceName, manager.DiskLog(rxa.Disk.Path, rxa.Disk.Offset), manager.CauseLog(err, ioTimeout)))
		return nil, resultOf(err)
	}
	op.rx, op.path = rx, rxa.Disk.Path
	return op, 0
}

// paxosHost is our membership of lockspace name: -ENOENT when it is not
// joined, -ENOSPC when it is failing.
func (d *diskCmds) paxosHost(name string) (*paxos.Host, int32) {
	if d.s.deps.Manager == nil {
		return nil, client.RvENOENT
	}
	m := d.s.deps.Manager.Lockspaces
	if _, joined := m.Joined(name); !joined {
		return nil, client.RvENOENT
	}
	h, err := m.PaxosHost(name)
	return h, result(err)
}

func (d *diskCmds) lockRindex(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[name] {
		return false
	}
	d.busy[name] = true
	return true
}

func (d *diskCmds) unlockRindex(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.busy, name)
}

// withRindexLease runs f while holding the index's internal lease
// "rindex_lease" (owner-nowait), and releases it afterwards. sanlock 3.8.5
// takes it once per create, delete and rebuild (failed ones included), so
// its lver grows by one per operation.
//
// Two details follow sanlock: the lease's first read uses the index's
// sizes, not the lockspace's (a 4096/8M index in a 512/1M lockspace works),
// and the release rewrites only the leader, leaving our dblock without the
// RELEASED flag (sanlock frees this lease as paxos_lease_release alone
// does, unlike a client's lease).
func (d *diskCmds) withRindexLease(ctx context.Context, op *rindexOp, f func() int32) int32 {
	h := op.host
	host := &paxos.Host{
		ID: h.ID, Generation: h.Generation, Space: h.Space, Geometry: op.rx.Geo,
		IOTimeout: h.IOTimeout, WatchdogFireTimeout: h.WatchdogFireTimeout, ShRetries: h.ShRetries,
		Clock: h.Clock, Live: h.Live, Log: h.Log,
		Rand: rand.New(rand.NewPCG(h.ID, uint64(time.Now().UnixNano()))),
	}
	leaseOff := op.rx.Offset + int64(op.rx.Geo.AlignSize)
	lease := paxos.Lease{Host: host, Name: diskfmt.RindexLeaseName, Disks: []paxos.Disk{{Dev: op.rx.Dev, Offset: leaseOff}}}
	held, err := lease.Acquire(ctx, paxos.AcquireRequest{OwnerNowait: true})
	if err != nil {
		rv := resultOf(err)
		d.s.lg.Error(fmt.Sprintf("rindex_lease acquire error %d lockspace %s disk %s: %s", rv, h.Space,
			manager.DiskLog(op.path, uint64(leaseOff)), manager.CauseLog(err, h.IOTimeout)))
		return rv
	}
	rv := f()
	// Release even when the daemon is stopping: a lease left held would
	// keep the other hosts out of the index for as long as we live.
	if err := dkReleaseLeader(context.WithoutCancel(ctx), host, held, op.rx.Dev, leaseOff); err != nil {
		d.s.lg.Error(fmt.Sprintf("rindex_lease release error %d lockspace %s disk %s: %s", resultOf(err), h.Space,
			manager.DiskLog(op.path, uint64(leaseOff)), manager.CauseLog(err, h.IOTimeout)))
	}
	return rv
}

// dkReleaseLeader frees a held lease by rewriting its leader only
// (docs/paxos.md "Leader release"): read the leader, and write it free if we are still the
// writer of the leader we hold (paxos.DecideRelease, paxos.ReleaseLeader).
func dkReleaseLeader(ctx context.Context, h *paxos.Host, held *paxos.Held, dev diskfmt.Device, off int64) error {
	ss := held.Geometry.SectorSize
	cur, raw, err := diskfmt.ReadPaxosLeader(ctx, dev, off, ss, h.Space, diskfmt.RindexLeaseName, h.ID)
	if err != nil {
		return err
	}
	write, err := paxos.DecideRelease(&cur, &held.Leader, h.ID, h.Generation)
	if err != nil || !write {
		return err
	}
	nl := paxos.ReleaseLeader(cur, h.ID, h.Generation, delta.Monotime(h.Clock), "")
	clear(raw)
	nl.Seal(raw)
	return dev.WriteAt(ctx, raw, off)
}

// rebuildRindex: REBUILD_RINDEX (docs/protocol.md "Commands" #40). With SANLK_RX_NO_LOCKSPACE no
// lockspace and no rindex_lease are needed.
func (d *diskCmds) rebuildRindex(ctx context.Context, c *Conn, q *client.Request) error {
	rxa := rindexOf(q)
	needLS := q.Header.CmdFlags&client.RXNoLockspace == 0
	op, rv := d.beginRindex(ctx, "rindex_rebuild", &rxa, needLS)
	if rv < 0 {
		return c.Reply(q, rv)
	}
	defer op.done()
	rebuild := func() int32 { return resultOf(op.rx.Rebuild(ctx)) }
	if needLS {
		rv = d.withRindexLease(ctx, op, rebuild)
	} else {
		rv = rebuild()
	}
	return c.Reply(q, rv)
}

// rindexEntryCmd wraps the four commands whose reply is the header (length
// 32 + 64, data2 0) and a sanlk_rentry, which is all zero on failure.
func (d *diskCmds) rindexEntryCmd(f func(context.Context, *client.Request, client.RIndex, client.REntry) (client.REntry, int32)) Handler {
	return func(ctx context.Context, c *Conn, q *client.Request) error {
		var in client.REntry
		if q.REntry != nil {
			in = *q.REntry
		}
		out, rv := f(ctx, q, rindexOf(q), in)
		if rv < 0 {
			out = client.REntry{}
		}
		h := q.Header
		h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), 0
		h.Length = client.HeaderSize + client.REntrySize
		b, err := out.AppendBinary(h.Bytes())
		if err != nil {
			return err
		}
		return c.write(b)
	}
}

// misaligned reports a given resource offset that is not a multiple of the
// index's align size (-277 before anything else is done).
func misaligned(op *rindexOp, off uint64) bool {
	return off != 0 && off%uint64(op.rx.Geo.AlignSize) != 0
}

// lookupRindex: LOOKUP_RINDEX (docs/protocol.md "Commands" #37). Read-only; see diskfmt
// Rindex.Lookup for the four forms.
func (d *diskCmds) lookupRindex(ctx context.Context, q *client.Request, rxa client.RIndex, e client.REntry) (client.REntry, int32) {
	op, rv := d.beginRindex(ctx, "rindex_lookup", &rxa, q.Header.CmdFlags&client.RXNoLockspace == 0)
	if rv < 0 {
		return client.REntry{}, rv
	}
	defer op.done()
	found, err := op.rx.Lookup(ctx, e.Name, e.Offset)
	if err != nil {
		rv := resultOf(err)
		if rv == client.RvENOSPC {
			rv = client.RvENOENT // no free entry: sanlock 3.8.5 says -ENOENT
		}
		return client.REntry{}, rv
	}
	return client.REntry{Name: diskfmt.NameString(found.Name[:]), Offset: found.ResOffset}, 0
}

// updateRindex: UPDATE_RINDEX (docs/protocol.md "Commands" #36). RXUP_REM frees the entry of the
// offset (and wins when both flags are set), RXUP_ADD records name there;
// rindex_lease is not taken. The reply echoes the added entry.
func (d *diskCmds) updateRindex(ctx context.Context, q *client.Request, rxa client.RIndex, e client.REntry) (client.REntry, int32) {
	op, rv := d.beginRindex(ctx, "rindex_update", &rxa, q.Header.CmdFlags&client.RXNoLockspace == 0)
	if rv < 0 {
		return client.REntry{}, rv
	}
	defer op.done()
	if misaligned(op, e.Offset) {
		return client.REntry{}, int32(diskfmt.ErrRindexOffset)
	}
	remove := q.Header.CmdFlags&client.RXUpRem != 0
	if !remove && q.Header.CmdFlags&client.RXUpAdd == 0 {
		return client.REntry{}, client.RvEINVAL
	}
	if err := op.rx.UpdateEntry(ctx, e.Name, e.Offset, remove); err != nil {
		return client.REntry{}, resultOf(err)
	}
	if remove {
		return client.REntry{}, 0
	}
	return client.REntry{Name: e.Name, Offset: e.Offset}, 0
}

// createResource: CREATE_RESOURCE (docs/protocol.md "Commands" #38). Under rindex_lease: take the
// first free entry, initialise the lease it stands for (num_hosts from
// header data2, 0 = max_hosts), then record the entry. The reply carries
// the new lease's offset. Any name is accepted, even an empty one (as
// sanlock does).
func (d *diskCmds) createResource(ctx context.Context, q *client.Request, rxa client.RIndex, e client.REntry) (client.REntry, int32) {
	op, rv := d.beginRindex(ctx, "rindex_create", &rxa, true)
	if rv < 0 {
		return client.REntry{}, rv
	}
	defer op.done()
	var off uint64
	rv = d.withRindexLease(ctx, op, func() int32 {
		es, err := op.rx.Entries(ctx)
		if err != nil {
			return resultOf(err)
		}
		i := -1
		for j := range es {
			if es[j].IsFree() {
				i = j
				break
			}
		}
		if i < 0 {
			// sanlock 3.8.5 answers a full index with -ENOENT.
			d.s.lg.Error(fmt.Sprintf("rindex_create no free entry for %s lockspace %s disk %s", e.Name, rxa.LockspaceName,
				manager.DiskLog(rxa.Disk.Path, rxa.Disk.Offset)))
			return client.RvENOENT
		}
		off = diskfmt.RindexResourceOffset(op.rx.Geo, op.rx.Header.RxOffset, i)
		p := diskfmt.PaxosInit{SpaceName: rxa.LockspaceName, ResourceName: e.Name, NumHosts: uint64(q.Header.Data2)}
		disks := []diskfmt.ResourceDisk{{Dev: op.rx.Dev, Offset: int64(off)}}
		if err := diskfmt.WriteResource(ctx, disks, diskfmt.SizeFlags(op.rx.Geo), p); err != nil {
			return resultOf(err)
		}
		name, err := diskfmt.Name(e.Name)
		if err != nil {
			return resultOf(err)
		}
		d.s.lg.Info(fmt.Sprintf("rindex_create found offset %d for %s:%s", off, rxa.LockspaceName, e.Name))
		return resultOf(dkWriteEntry(ctx, op.rx, i, diskfmt.RindexEntry{ResOffset: off, Name: name}))
	})
	if rv < 0 {
		return client.REntry{}, rv
	}
	return client.REntry{Offset: off}, 0
}

// deleteResource: DELETE_RESOURCE (docs/protocol.md "Commands" #39). A given offset must be an
// align multiple (-277, checked before rindex_lease is taken) but is
// otherwise ignored: the entry is found by name. Under rindex_lease the
// entry is freed, then its lease is invalidated (PAXOS_DISK_CLEAR, name
// kept).
func (d *diskCmds) deleteResource(ctx context.Context, q *client.Request, rxa client.RIndex, e client.REntry) (client.REntry, int32) {
	op, rv := d.beginRindex(ctx, "rindex_delete", &rxa, true)
	if rv < 0 {
		return client.REntry{}, rv
	}
	defer op.done()
	if misaligned(op, e.Offset) {
		return client.REntry{}, int32(diskfmt.ErrRindexOffset)
	}
	rv = d.withRindexLease(ctx, op, func() int32 {
		if e.Name == "" {
			return client.RvENOENT
		}
		es, err := op.rx.Entries(ctx)
		if err != nil {
			return resultOf(err)
		}
		for i := range es {
			if es[i].IsFree() || !diskfmt.NameEqual(es[i].Name[:], e.Name) {
				continue
			}
			if err := dkWriteEntry(ctx, op.rx, i, diskfmt.RindexEntry{}); err != nil {
				return resultOf(err)
			}
			off := diskfmt.RindexResourceOffset(op.rx.Geo, op.rx.Header.RxOffset, i)
			p := diskfmt.PaxosInit{SpaceName: rxa.LockspaceName, ResourceName: e.Name, Clear: true, ClearTime: monoSeconds()}
			disks := []diskfmt.ResourceDisk{{Dev: op.rx.Dev, Offset: int64(off)}}
			return resultOf(diskfmt.WriteResource(ctx, disks, diskfmt.SizeFlags(op.rx.Geo), p))
		}
		return client.RvENOENT
	})
	return client.REntry{}, rv
}

// dkWriteEntry rewrites the one sector that holds entry i with e. (Unlike
// diskfmt's Rindex.UpdateEntry it records an entry whatever its name,
// which create needs: sanlock creates leases with an empty name too.)
func dkWriteEntry(ctx context.Context, rx *diskfmt.Rindex, i int, e diskfmt.RindexEntry) error {
	eo := diskfmt.RindexEntryOffset(rx.Geo, i)
	ss := int64(rx.Geo.SectorSize)
	secOff := rx.Offset + eo/ss*ss
	b, err := diskfmt.ReadSector(ctx, rx.Dev, secOff, rx.Geo.SectorSize)
	if err != nil {
		return err
	}
	e.Encode(b[eo%ss:])
	return rx.Dev.WriteAt(ctx, b, secOff)
}
