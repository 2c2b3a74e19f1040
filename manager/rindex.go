package manager

import (
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// FormatRindex writes an empty resource index: FORMAT_RINDEX (docs/protocol.md "Commands" #35, docs/ondisk.md
// "Resource index operations"). No lockspace is needed.
func (d *DiskOps) FormatRindex(ctx context.Context, rx wire.RIndex) error {
	dev, err := d.open(rx.Disk.Path, d.writeInitIO())
	if err != nil {
		d.lg().Error("rindex_format open failed", resultField(err), diskField(rx.Disk.Path, rx.Disk.Offset),
			causeField(err, 0))
		return err
	}
	defer dev.Close()
	err = diskfmt.FormatRindex(ctx, dev, int64(rx.Disk.Offset), rx.Flags, rx.LockspaceName, rx.MaxResources)
	return resultErr(err)
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
func (d *DiskOps) beginRindex(ctx context.Context, what string, rxa *wire.RIndex, needLS bool) (*rindexOp, error) {
	op := &rindexOp{}
	dev, err := d.openRaw(rxa.Disk.Path)
	if err != nil {
		d.lg().Error(what+" open failed", resultField(err), diskField(rxa.Disk.Path, rxa.Disk.Offset),
			causeField(err, 0))
		return nil, err
	}
	closeDev := func() { _ = dev.Close() }
	ss, ioTimeout := 0, 0
	op.done = closeDev
	if needLS {
		h, err := d.paxosHost(rxa.LockspaceName)
		if rescode.CodeOf(err) == rescode.ErrENOENT {
			d.lg().Error(what+" lockspace not available: not joined", resultField(err), spaceField(rxa.LockspaceName),
				zap.String("rindex", diskLog(rxa.Disk.Path, rxa.Disk.Offset)))
		}
		if err != nil {
			closeDev()
			return nil, err
		}
		if !d.lockRindex(rxa.LockspaceName) {
			closeDev()
			d.lg().Error(what+" lockspace busy with another rindex op", spaceField(rxa.LockspaceName),
				zap.String("rindex", diskLog(rxa.Disk.Path, rxa.Disk.Offset)))
			return nil, rescode.Code(rescode.RvEBUSY)
		}
		op.host, ss, ioTimeout = h, h.Geometry.SectorSize, h.IOTimeout
		op.done = func() { d.unlockRindex(rxa.LockspaceName); closeDev() }
	}
	dev = d.bound(dev, ioTimeout)
	rx, err := diskfmt.OpenRindex(ctx, dev, int64(rxa.Disk.Offset), rxa.LockspaceName, ss)
	if err != nil {
		op.done()
		d.lg().Error(what+" read of the rindex header error", resultField(err), spaceField(rxa.LockspaceName),
			diskField(rxa.Disk.Path, rxa.Disk.Offset), causeField(err, ioTimeout))
		return nil, resultErr(err)
	}
	op.rx, op.path = rx, rxa.Disk.Path
	return op, nil
}

// paxosHost is our membership of lockspace name: -ENOENT when it is not
// joined, -ENOSPC when it is failing.
func (d *DiskOps) paxosHost(name string) (*paxos.Host, error) {
	if _, joined := d.ls.Joined(name); !joined {
		return nil, rescode.Code(rescode.RvENOENT)
	}
	return d.ls.PaxosHost(name)
}

func (d *DiskOps) lockRindex(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[name] {
		return false
	}
	d.busy[name] = true
	return true
}

func (d *DiskOps) unlockRindex(name string) {
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
func (d *DiskOps) withRindexLease(ctx context.Context, op *rindexOp, f func() error) error {
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
		d.lg().Error("rindex_lease acquire error", resultField(err), spaceField(h.Space),
			diskField(op.path, uint64(leaseOff)), causeField(err, h.IOTimeout))
		return resultErr(err)
	}
	ferr := f()
	// Release even when the daemon is stopping: a lease left held would
	// keep the other hosts out of the index for as long as we live.
	if err := dkReleaseLeader(context.WithoutCancel(ctx), host, held, op.rx.Dev, leaseOff); err != nil {
		d.lg().Error("rindex_lease release error", resultField(err), spaceField(h.Space),
			diskField(op.path, uint64(leaseOff)), causeField(err, h.IOTimeout))
	}
	return ferr
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
	nl := paxos.ReleaseLeader(cur, h.ID, h.Generation, clock.Monotime(h.Clock), "")
	clear(raw)
	nl.Seal(raw)
	return dev.WriteAt(ctx, raw, off)
}

// RebuildRindex rebuilds the entries of a resource index from the leases: REBUILD_RINDEX (docs/protocol.md "Commands" #40). With SANLK_RX_NO_LOCKSPACE no
// lockspace and no rindex_lease are needed.
func (d *DiskOps) RebuildRindex(ctx context.Context, rxa wire.RIndex, noLockspace bool) error {
	needLS := !noLockspace
	op, err := d.beginRindex(ctx, "rindex_rebuild", &rxa, needLS)
	if err != nil {
		return err
	}
	defer op.done()
	rebuild := func() error { return resultErr(op.rx.Rebuild(ctx)) }
	if needLS {
		return d.withRindexLease(ctx, op, rebuild)
	}
	return rebuild()
}

// misaligned reports a given resource offset that is not a multiple of the
// index's align size (-277 before anything else is done).
func misaligned(op *rindexOp, off uint64) bool {
	return off != 0 && off%uint64(op.rx.Geo.AlignSize) != 0
}

// LookupRindex: LOOKUP_RINDEX (docs/protocol.md "Commands" #37). Read-only; see diskfmt
// Rindex.Lookup for the four forms.
func (d *DiskOps) LookupRindex(ctx context.Context, rxa wire.RIndex, e wire.REntry, flags uint32) (wire.REntry, error) {
	op, err := d.beginRindex(ctx, "rindex_lookup", &rxa, flags&wire.RXNoLockspace == 0)
	if err != nil {
		return wire.REntry{}, err
	}
	defer op.done()
	found, err := op.rx.Lookup(ctx, e.Name, e.Offset)
	if err != nil {
		if rescode.CodeOf(err) == rescode.ErrENOSPC {
			return wire.REntry{}, rescode.ErrENOENT // no free entry: sanlock 3.8.5 says -ENOENT
		}
		return wire.REntry{}, resultErr(err)
	}
	return wire.REntry{Name: diskfmt.NameString(found.Name[:]), Offset: found.ResOffset}, nil
}

// UpdateRindex: UPDATE_RINDEX (docs/protocol.md "Commands" #36). RXUP_REM frees the entry of the
// offset (and wins when both flags are set), RXUP_ADD records name there;
// rindex_lease is not taken. The reply echoes the added entry.
func (d *DiskOps) UpdateRindex(ctx context.Context, rxa wire.RIndex, e wire.REntry, flags uint32) (wire.REntry, error) {
	op, err := d.beginRindex(ctx, "rindex_update", &rxa, flags&wire.RXNoLockspace == 0)
	if err != nil {
		return wire.REntry{}, err
	}
	defer op.done()
	if misaligned(op, e.Offset) {
		return wire.REntry{}, rescode.ErrRindexOffset
	}
	remove := flags&wire.RXUpRem != 0
	if !remove && flags&wire.RXUpAdd == 0 {
		return wire.REntry{}, rescode.Code(rescode.RvEINVAL)
	}
	if err := op.rx.UpdateEntry(ctx, e.Name, e.Offset, remove); err != nil {
		return wire.REntry{}, resultErr(err)
	}
	if remove {
		return wire.REntry{}, nil
	}
	return wire.REntry{Name: e.Name, Offset: e.Offset}, nil
}

// CreateResource: CREATE_RESOURCE (docs/protocol.md "Commands" #38). Under rindex_lease: take the
// first free entry, initialise the lease it stands for (num_hosts from
// header data2, 0 = max_hosts), then record the entry. The reply carries
// the new lease's offset. Any name is accepted, even an empty one (as
// sanlock does).
func (d *DiskOps) CreateResource(ctx context.Context, rxa wire.RIndex, e wire.REntry, numHosts uint32) (wire.REntry, error) {
	op, err := d.beginRindex(ctx, "rindex_create", &rxa, true)
	if err != nil {
		return wire.REntry{}, err
	}
	defer op.done()
	var off uint64
	err = d.withRindexLease(ctx, op, func() error {
		es, err := op.rx.Entries(ctx)
		if err != nil {
			return resultErr(err)
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
			d.lg().Error("rindex_create no free entry", resField(e.Name), spaceField(rxa.LockspaceName),
				diskField(rxa.Disk.Path, rxa.Disk.Offset))
			return rescode.Code(rescode.RvENOENT)
		}
		off = diskfmt.RindexResourceOffset(op.rx.Geo, op.rx.Header.RxOffset, i)
		p := diskfmt.PaxosInit{SpaceName: rxa.LockspaceName, ResourceName: e.Name, NumHosts: uint64(numHosts)}
		disks := []diskfmt.ResourceDisk{{Dev: op.rx.Dev, Offset: int64(off)}}
		if err := diskfmt.WriteResource(ctx, disks, diskfmt.SizeFlags(op.rx.Geo), p); err != nil {
			return resultErr(err)
		}
		name, err := diskfmt.Name(e.Name)
		if err != nil {
			return resultErr(err)
		}
		d.lg().Info("rindex_create found offset", zap.Uint64("offset", off), spaceField(rxa.LockspaceName), resField(e.Name))
		return resultErr(dkWriteEntry(ctx, op.rx, i, diskfmt.RindexEntry{ResOffset: off, Name: name}))
	})
	if err != nil {
		return wire.REntry{}, err
	}
	return wire.REntry{Offset: off}, nil
}

// DeleteResource: DELETE_RESOURCE (docs/protocol.md "Commands" #39). A given offset must be an
// align multiple (-277, checked before rindex_lease is taken) but is
// otherwise ignored: the entry is found by name. Under rindex_lease the
// entry is freed, then its lease is invalidated (PAXOS_DISK_CLEAR, name
// kept).
func (d *DiskOps) DeleteResource(ctx context.Context, rxa wire.RIndex, e wire.REntry) (wire.REntry, error) {
	op, err := d.beginRindex(ctx, "rindex_delete", &rxa, true)
	if err != nil {
		return wire.REntry{}, err
	}
	defer op.done()
	if misaligned(op, e.Offset) {
		return wire.REntry{}, rescode.ErrRindexOffset
	}
	return wire.REntry{}, d.withRindexLease(ctx, op, func() error {
		if e.Name == "" {
			return rescode.Code(rescode.RvENOENT)
		}
		es, err := op.rx.Entries(ctx)
		if err != nil {
			return resultErr(err)
		}
		for i := range es {
			if es[i].IsFree() || !diskfmt.NameEqual(es[i].Name[:], e.Name) {
				continue
			}
			if err := dkWriteEntry(ctx, op.rx, i, diskfmt.RindexEntry{}); err != nil {
				return resultErr(err)
			}
			off := diskfmt.RindexResourceOffset(op.rx.Geo, op.rx.Header.RxOffset, i)
			p := diskfmt.PaxosInit{SpaceName: rxa.LockspaceName, ResourceName: e.Name, Clear: true, ClearTime: monoSeconds()}
			disks := []diskfmt.ResourceDisk{{Dev: op.rx.Dev, Offset: int64(off)}}
			return resultErr(diskfmt.WriteResource(ctx, disks, diskfmt.SizeFlags(op.rx.Geo), p))
		}
		return rescode.Code(rescode.RvENOENT)
	})
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
