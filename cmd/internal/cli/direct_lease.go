package cli

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/process"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
)

// The lease actions of "sanlock direct": acquire_id, renew_id and
// release_id run the delta-lease operations on one host_id, acquire and
// release one paxos ballot or leader release, all in this process without
// a daemon (docs/delta.md "Without a daemon", docs/paxos.md "Acquire algorithm", "Leader release").
// Behaviour, results and bytes follow the sanlock 3.8.5 binary; where it is unsafe we refuse
// instead (see the comments marked "unlike sanlock").

// directLiveness is what direct mode knows about other hosts: nothing.
// There is no lockspace, so the owner of a held lease cannot be judged
// (sanlock answers SANLK_ACQUIRE_LOCKSPACE, -241), and a shared holder
// counts as alive.
type directLiveness struct{}

func (directLiveness) Host(uint64) (paxos.HostView, bool) { return paxos.HostView{}, false }

func (directLiveness) ReadDeltaLease(context.Context, uint64) (diskfmt.Leader, error) {
	return diskfmt.Leader{}, rescode.ErrAcquireLockspace
}

// deltaLease opens the -s lockspace and returns the lease of its host_id,
// with the sizes from -Z/-A or from the leader at the lockspace offset.
// The caller closes l.Dev.
func (d *direct) deltaLease(o *DeltaOptions) (*delta.Lease, int) {
	ls := o.Lockspace
	switch {
	case ls.Disk.Path == "":
		return nil, int(rescode.ErrENODEV)
	case ls.HostID == 0:
		return nil, int(rescode.ErrEINVAL)
	}
	dev, err := d.open(ls.Disk.Path)
	if err != nil {
		return nil, int(rescode.ErrENODEV)
	}
	g, rv := d.leaseGeometry(dev, int64(ls.Disk.Offset))
	if rv != 0 {
		dev.Close()
		return nil, rv
	}
	return &delta.Lease{
		Dev:      dev,
		Offset:   int64(ls.Disk.Offset),
		Geometry: g,
		Space:    ls.Name,
		HostID:   ls.HostID,
		Timing:   delta.NewTiming(o.IOTimeout, o.WatchdogFireTimeout),
		Clock:    d.io.Clock(),
	}, 0
}

// leaseGeometry is the sizes of the lease at off: -Z/-A when both are
// given, else those recorded by the delta or paxos leader found there (no
// such leader: -1; a failed read: its error).
func (d *direct) leaseGeometry(dev diskfmt.Device, off int64) (diskfmt.Geometry, int) {
	if g, ok := diskfmt.GeometryFromFlags(d.sizeFlags); ok {
		return g, 0
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	l, err := diskfmt.ProbeLeader(ctx, dev, off)
	if err != nil {
		return diskfmt.Geometry{}, rvOf(err)
	}
	if l.Magic != diskfmt.DeltaMagic && l.Magic != diskfmt.PaxosMagic {
		return diskfmt.Geometry{}, int(rescode.ErrEPERM)
	}
	g, err := diskfmt.GeometryFromLeader(&l)
	if err != nil {
		return diskfmt.Geometry{}, rvOf(err)
	}
	return g, 0
}

// acquireID takes the host_id lease as add_lockspace does, and leaves it
// to expire: nothing renews it afterwards. An empty name is a new
// "<uuid>.<nodename>".
func (d *direct) acquireID(o *DeltaOptions, name string) int {
	l, rv := d.deltaLease(o)
	if rv != 0 {
		return rv
	}
	defer l.Dev.Close()
	if name == "" {
		var err error
		if name, err = process.GenerateHostName(process.Nodename()); err != nil {
			return int(rescode.ErrEPERM)
		}
	}
	_, err := l.Acquire(context.Background(), name)
	return rvOf(err)
}

// readOwnLease reads and verifies the lease of the -s host_id.
func (d *direct) readOwnLease(l *delta.Lease) (diskfmt.Leader, int) {
	ctx, cancel := d.ioContext()
	defer cancel()
	rec, _, err := diskfmt.ReadDeltaLeader(ctx, l.Dev, l.Offset, l.Geometry, l.Space, l.HostID)
	if err != nil {
		return rec, rvOf(err)
	}
	if rec.OwnerID == 0 {
		return rec, int(rescode.ErrEINVAL) // never acquired
	}
	return rec, 0
}

// renewID renews the lease once, for the owner the lease names, keeping
// its host event (extras); the bitmap is written empty.
func (d *direct) renewID(o *DeltaOptions) int {
	l, rv := d.deltaLease(o)
	if rv != 0 {
		return rv
	}
	defer l.Dev.Close()
	rec, rv := d.readOwnLease(l)
	if rv != 0 {
		return rv
	}
	// Like sanlock, the renewal runs for the host_id recorded in the
	// lease, and only if that host's slot still names the same owner,
	// generation and host name.
	l.HostID = rec.OwnerID
	_, err := l.Renew(context.Background(), delta.RenewInput{
		Last:  rec,
		Event: delta.HostEvent{Generation: rec.WriteID, Event: rec.WriteGeneration, Data: rec.WriteTimestamp},
	})
	return rvOf(err)
}

// releaseID frees the lease (timestamp 0) whoever holds it.
func (d *direct) releaseID(o *DeltaOptions) int {
	l, rv := d.deltaLease(o)
	if rv != 0 {
		return rv
	}
	defer l.Dev.Close()
	rec, rv := d.readOwnLease(l)
	if rv != 0 {
		return rv
	}
	if rec.OwnerID != l.HostID {
		// Unlike sanlock, which writes this record into the slot of
		// the host_id it names, clobbering that host's lease.
		return int(rescode.ErrEINVAL)
	}
	return rvOf(l.Release(context.Background(), rec))
}

// resourceDisks opens the disks of the first -r resource, all of them
// (acquire). The caller closes them.
func (d *direct) resourceDisks(r *client.Resource) ([]paxos.Disk, int) {
	if r == nil {
		// sanlock crashes here
		return nil, int(rescode.ErrEINVAL)
	}
	if len(r.Disks) == 0 {
		return nil, int(rescode.ErrEPERM)
	}
	var disks []paxos.Disk
	for _, dk := range r.Disks {
		dev, err := d.open(dk.Path)
		if err != nil {
			closeDisks(disks)
			return nil, rvOf(err)
		}
		disks = append(disks, paxos.Disk{Dev: dev, Offset: int64(dk.Offset)})
	}
	return disks, 0
}

// leaderDisks opens the disks of a resource for a leader read or write
// (read_leader, release). As in sanlock 3.8.5, a disk that cannot be
// opened stays in the list as one whose every I/O fails (failedDevice),
// so a minority of them leaves the leader to the majority of the others;
// too few disks that open give the open error. The caller closes them.
func (d *direct) leaderDisks(r *client.Resource) ([]paxos.Disk, int) {
	if r == nil {
		return nil, int(rescode.ErrEINVAL) // sanlock crashes here
	}
	if len(r.Disks) == 0 {
		return nil, int(rescode.ErrEPERM)
	}
	disks := make([]paxos.Disk, 0, len(r.Disks))
	opened := 0
	var openErr error
	for _, dk := range r.Disks {
		dev, err := d.open(dk.Path)
		if err != nil {
			dev, openErr = failedDevice{}, err
		} else {
			opened++
		}
		disks = append(disks, paxos.Disk{Dev: dev, Offset: int64(dk.Offset)})
	}
	if !paxos.Majority(len(disks), opened) {
		closeDisks(disks)
		return nil, rvOf(openErr)
	}
	return disks, 0
}

// failedDevice is a disk that could not be opened: every I/O fails with
// EBADF, as sanlock 3.8.5's I/O on such a disk does.
type failedDevice struct{}

func (failedDevice) ReadAt(context.Context, []byte, int64) error  { return syscall.EBADF }
func (failedDevice) WriteAt(context.Context, []byte, int64) error { return syscall.EBADF }
func (failedDevice) SectorSize() int                              { return diskfmt.SectorSize512 }
func (failedDevice) Close() error                                 { return nil }

func closeDisks(disks []paxos.Disk) {
	for _, dk := range disks {
		dk.Dev.Close()
	}
}

// acquire runs paxos_lease_acquire for host_id -i, generation -g. As in
// sanlock, the lver, SH and -n parts of the request are not used, and a
// lease owned by another host fails with -241: there is no lockspace to
// tell whether the owner is alive.
func (d *direct) acquire(o *DirectAcquireOptions) int {
	disks, rv := d.resourceDisks(o.Resource)
	if rv != 0 {
		return rv
	}
	defer closeDisks(disks)
	if o.HostID == 0 {
		// Unlike sanlock, which runs the ballot as host_id 0: its
		// dblock is sector 1, the request record.
		return int(rescode.ErrEINVAL)
	}
	g, rv := d.leaseGeometry(disks[0].Dev, disks[0].Offset)
	if rv != 0 {
		return rv
	}
	r := o.Resource
	host := &paxos.Host{
		ID:                  o.HostID,
		Generation:          o.Generation,
		Space:               r.LockspaceName,
		Geometry:            g,
		IOTimeout:           o.IOTimeout,
		WatchdogFireTimeout: o.WatchdogFireTimeout,
		ShRetries:           paxos.DefaultShRetries,
		Clock:               d.io.Clock(),
		Live:                directLiveness{},
		Rand:                rand.New(rand.NewPCG(o.HostID, uint64(time.Now().UnixNano()))),
	}
	lease := paxos.Lease{Host: host, Name: r.Name, Disks: disks}
	// Unlike sanlock, shared holders found by the ballot make the acquire
	// fail (-11) after undoing it: direct mode cannot tell they are dead.
	_, err := lease.Acquire(context.Background(), paxos.AcquireRequest{})
	return rvOf(err)
}

// release frees the leader of the first -r resource as sanlock's direct
// release does: as host_id 0 generation 0 (-i and -g are not used), so
// it writes only a leader whose writer is host_id 0, and returns 0
// without writing when another host wrote the leader.
func (d *direct) release(r *client.Resource) int {
	if r == nil {
		return int(rescode.ErrEINVAL) // sanlock crashes here
	}
	// The sizes come from the leader read like read_leader -r (on
	// several disks, the one a majority agrees on).
	l, rv := d.readResourceLeader(*r)
	if rv != 0 {
		return rv
	}
	g, err := diskfmt.GeometryFromLeader(&l)
	if err != nil {
		return rvOf(err)
	}
	disks, rv := d.leaderDisks(r)
	if rv != 0 {
		return rv
	}
	defer closeDisks(disks)
	ctx, cancel := d.ioContext()
	defer cancel()
	// The leader I/O of a ballot, as host_id 0 (no num_hosts check).
	lio := paxos.LeaderIO{Disks: disks, SectorSize: g.SectorSize,
		IOTimeout: time.Duration(d.ioTimeout) * time.Second, DeviceErrors: true}
	cur, err := paxos.ReadLeader(ctx, lio, r.LockspaceName, r.Name, 0)
	if err != nil {
		return rvOf(err)
	}
	write, err := paxos.DecideRelease(&cur, nil, 0, 0)
	if err != nil || !write {
		return rvOf(err)
	}
	nl := paxos.ReleaseLeader(cur, 0, 0, clock.Monotime(d.io.Clock()), "")
	return rvOf(paxos.WriteLeader(ctx, lio, &nl))
}
