package manager

import (
	"context"
	"encoding/binary"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// The delta lease commands of sanlock 5.x: READ_LOCKSPACE_HOST,
// INIT_LOCKSPACE_HOST and WRITE_LOCKSPACE LS_FLAGS (docs/protocol.md
// "Commands of 3.9.5 and 5.1.1").

// errEMSGSIZE is 5.1.1's answer to a host_id beyond the lockspace's size.
const errEMSGSIZE rescode.Code = -90

// Lockspace flags of 5.x in the lockspace structure, and the leader flag
// bits they stand for.
const (
	lsfNoTimeout = 0x4 // SANLK_LSF_NO_TIMEOUT: leader flag NoTimeout
	lsfUsingCAW  = 0x8 // SANLK_LSF_USING_CAW: leader flag CAW
)

// lsFlagsOf is the lockspace flags a delta leader shows: its sizes, and
// the NO_TIMEOUT and CAW marks.
func lsFlagsOf(g diskfmt.Geometry, l *diskfmt.Leader) uint32 {
	f := diskfmt.SizeFlags(g)
	if l.NoTimeout() {
		f |= lsfNoTimeout
	}
	if l.CAW() {
		f |= lsfUsingCAW
	}
	return f
}

// deltaGeometry is the geometry of the lockspace at off: from the size
// flags when they give both sizes, else from the leader of its first
// sector (which must be a delta lease of a version we read).
func deltaGeometry(ctx context.Context, dev diskfmt.Device, off int64, flags uint32) (diskfmt.Geometry, error) {
	if g, ok := diskfmt.GeometryFromFlags(flags); ok {
		return g, nil
	}
	l, err := diskfmt.ProbeLeader(ctx, dev, off)
	if err != nil {
		return diskfmt.Geometry{}, resultErr(err)
	}
	switch {
	case l.Magic != diskfmt.DeltaMagic:
		return diskfmt.Geometry{}, rescode.ErrLeaderMagic
	case !diskfmt.DeltaVersionKnown(l.Version):
		return diskfmt.Geometry{}, rescode.ErrLeaderVersion
	}
	g, err := diskfmt.GeometryFromLeader(&l)
	if err != nil {
		return diskfmt.Geometry{}, rescode.ErrEINVAL
	}
	return g, nil
}

// ReadLockspaceHost is READ_LOCKSPACE_HOST: the delta lease of host_id
// (1 when 0) of the lockspace at ls.Disk. It returns the lockspace (the
// lease's name when ls has none; flags: sizes, NO_TIMEOUT, USING_CAW), the
// host record (owner_id, generation, timestamp and io_timeout of the
// sector; flags 0) and the lease's io_timeout. On error the lockspace is
// ls as given (host_id 0 made 1), as 5.1.1 answers.
func (m *Lockspaces) ReadLockspaceHost(ctx context.Context, ls wire.Lockspace) (wire.Lockspace, wire.Host, uint32, error) {
	if ls.HostID == 0 {
		ls.HostID = 1
	}
	if ls.Disk.Path == "" {
		return ls, wire.Host{}, 0, rescode.ErrENODEV
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return ls, wire.Host{}, 0, rescode.ErrENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, DefaultIOTimeout)
	defer cancel()
	off := int64(ls.Disk.Offset)
	g, err := deltaGeometry(ioctx, dev, off, ls.Flags)
	if err != nil {
		return ls, wire.Host{}, 0, err
	}
	if ls.HostID > uint64(g.MaxHosts) {
		return ls, wire.Host{}, 0, errEMSGSIZE
	}
	raw, err := diskfmt.ReadSector(ioctx, dev, off+diskfmt.DeltaSectorOffset(ls.HostID, g.SectorSize), g.SectorSize)
	if err != nil {
		return ls, wire.Host{}, 0, resultErr(err)
	}
	name := ls.Name
	if name == "" {
		l, _ := diskfmt.DecodeLeader(raw)
		name = diskfmt.NameString(l.SpaceName[:])
	}
	l, err := diskfmt.VerifyDelta(raw, name)
	if err != nil {
		return ls, wire.Host{}, 0, resultErr(err)
	}
	out := ls
	out.Name = name
	out.Flags = lsFlagsOf(g, &l)
	h := wire.Host{HostID: l.OwnerID, Generation: l.OwnerGeneration, Timestamp: l.Timestamp, IOTimeout: uint32(l.IOTimeout)}
	return out, h, uint32(l.IOTimeout), nil
}

// InitLockspaceHostRequest is INIT_LOCKSPACE_HOST.
type InitLockspaceHostRequest struct {
	// Lockspace: name (required), host_id (1..max), size flags (0: from
	// the device; SANLK_LSF_NO_TIMEOUT marks the lease NO_TIMEOUT, which
	// only a 5.x delta version carries: -EINVAL with 3.4) and disk.
	Lockspace wire.Lockspace
	// Flags: wire.InitHostUseCAW, wire.InitHostNoCAW. Neither changes
	// what is written: we write no CAW mark (docs/compat.md "CAW").
	Flags uint32
	// IOTimeout written into the lease; 0: DefaultIOTimeout.
	IOTimeout uint32
	// Record is the 200-byte delta lease record of the request; its
	// owner_generation (40), host name (104) and timestamp (152) are
	// written. The owner is Lockspace.HostID whatever the record says.
	Record []byte
}

// InitLockspaceHost writes the delta lease of one host_id (5.x's
// init_host): the lockspace name, owner host_id, the record's generation,
// host name and timestamp, the io_timeout, in the delta version the
// daemon creates (create_delta_disk_version). Our own live lease is not
// written (-EBUSY): this daemon has that lockspace joined with that
// host_id; nor is a host this daemon sees alive in a lockspace it has
// joined (-EBUSY; 5.1.1 writes both).
func (m *Lockspaces) InitLockspaceHost(ctx context.Context, req InitLockspaceHostRequest) error {
	ls := req.Lockspace
	switch {
	case ls.HostID == 0 || ls.Name == "" || len(req.Record) < wire.DeltaLeaderSize:
		return rescode.ErrEINVAL
	case ls.Disk.Path == "":
		return rescode.ErrENODEV
	}
	if _, err := diskfmt.Name(ls.Name); err != nil {
		return rescode.ErrEINVAL
	}
	if m.usesHost(&ls) || m.seesAlive(&ls) {
		return rescode.ErrEBUSY
	}
	io := req.IOTimeout
	if io == 0 {
		io = DefaultIOTimeout
	}
	if io > 0xffff {
		return rescode.ErrEINVAL
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return rescode.ErrENODEV
	}
	defer dev.Close()
	g, err := diskfmt.GeometryForWrite(ls.Flags, dev.SectorSize())
	if err != nil {
		return resultErr(err)
	}
	if ls.HostID > uint64(g.MaxHosts) {
		return errEMSGSIZE
	}
	rec := req.Record
	name := diskfmt.NameString(rec[104 : 104+diskfmt.NameLen])
	ioctx, cancel := ioTimeoutCtx(ctx, m.conf().WriteInitIOTimeout)
	defer cancel()
	return resultErr(diskfmt.WriteDeltaHost(ioctx, dev, int64(ls.Disk.Offset), diskfmt.DeltaHost{
		Geometry: g, Space: ls.Name, HostID: ls.HostID, Generation: binary.LittleEndian.Uint64(rec[40:]),
		HostName: name, Timestamp: binary.LittleEndian.Uint64(rec[152:]), IOTimeout: uint16(io),
		Version: m.conf().DeltaVersion, NoTimeout: ls.Flags&lsfNoTimeout != 0,
	}))
}

// WriteLockspaceFlags is WRITE_LOCKSPACE LS_FLAGS: the leader flags of
// every delta lease of the existing lockspace at ls.Disk get NO_TIMEOUT
// set or cleared as ls.Flags says (SANLK_LSF_NO_TIMEOUT); the rest of each
// sector is kept. ls.Flags must give the lockspace's align and sector
// sizes: none at all is -EINVAL, one missing or a size that is not the
// lockspace's is -EPERM (5.1.1's answers). A lockspace this daemon has
// joined or is adding is refused (-EBUSY; 5.1.1 rewrites it and its own
// next renewal then fails). Sectors that hold no delta lease are left
// alone; a first sector without one is -223 and nothing is written.
func (m *Lockspaces) WriteLockspaceFlags(ctx context.Context, ls wire.Lockspace) error {
	sizes := ls.Flags & (wire.ResAlign1M | wire.ResAlign2M | wire.ResAlign4M | wire.ResAlign8M | wire.ResSector512 | wire.ResSector4K)
	if sizes == 0 {
		return rescode.ErrEINVAL
	}
	want, ok := diskfmt.GeometryFromFlags(ls.Flags)
	if !ok {
		return rescode.ErrEPERM
	}
	if ls.Disk.Path == "" {
		return rescode.ErrENODEV
	}
	if m.usesDisk(&ls) {
		return rescode.ErrEBUSY
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return rescode.ErrENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, m.conf().WriteInitIOTimeout)
	defer cancel()
	off := int64(ls.Disk.Offset)
	g, err := deltaGeometry(ioctx, dev, off, 0)
	if err != nil {
		return err
	}
	if g != want {
		return rescode.ErrEPERM
	}
	area := make([]byte, g.AlignSize)
	if err := dev.ReadAt(ioctx, area, off); err != nil {
		return resultErr(err)
	}
	changed := false
	for i := 0; i < g.MaxHosts; i++ {
		b := area[i*g.SectorSize : (i+1)*g.SectorSize]
		l, _ := diskfmt.DecodeLeader(b)
		if l.Magic != diskfmt.DeltaMagic || !diskfmt.DeltaVersionKnown(l.Version) {
			continue
		}
		flags := l.Flags &^ diskfmt.LeaderNoTimeout
		if ls.Flags&lsfNoTimeout != 0 {
			flags |= diskfmt.LeaderNoTimeout
		}
		if flags == l.Flags {
			continue
		}
		l.Flags = flags
		l.Seal(b)
		changed = true
	}
	if !changed {
		return nil
	}
	return resultErr(dev.WriteAt(ioctx, area, off))
}

// usesDisk reports whether a lockspace of this daemon (joined, being
// added or removed) lives at ls's disk and offset.
func (m *Lockspaces) usesDisk(ls *wire.Lockspace) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lists {
		for _, sp := range l {
			if sameDisk(&sp.ls, ls) {
				return true
			}
		}
	}
	return false
}

// seesAlive reports whether this daemon has joined the lockspace at ls's
// disk and offset and sees host ls.HostID in it LIVE or FAIL (renewing,
// or not yet dead): rewriting that host's lease would let a new owner of
// its host_id take its resource leases while it may still run.
func (m *Lockspaces) seesAlive(ls *wire.Lockspace) bool {
	m.mu.Lock()
	var run *delta.Lockspace
	for _, sp := range m.lists[listSpaces] {
		if sameDisk(&sp.ls, ls) {
			run = sp.run
		}
	}
	m.mu.Unlock()
	if run == nil {
		return false
	}
	st := run.HostState(ls.HostID)
	return st == delta.HostLive || st == delta.HostFail
}

// usesHost reports whether this daemon holds (or is acquiring or
// releasing) the delta lease of ls.HostID at ls's disk and offset.
func (m *Lockspaces) usesHost(ls *wire.Lockspace) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lists {
		for _, sp := range l {
			if sameDisk(&sp.ls, ls) && sp.ls.HostID == ls.HostID {
				return true
			}
		}
	}
	return false
}

// LocalHost is GET_HOSTS LOCAL: this host's record in lockspace name
// (the request's host_id is ignored). Before the first renewal has read
// the lockspace it is the host_id and generation with timestamp and
// io_timeout 0 and state UNKNOWN (5.1.1 answers flags 0x15 there).
func (m *Lockspaces) LocalHost(name string) ([]wire.Host, error) {
	run, ok := m.Joined(name)
	if !ok {
		return nil, rescode.ErrENOENT
	}
	st := run.Status()
	if infos, err := run.GetHosts(st.HostID); err == nil && len(infos) == 1 {
		h := infos[0]
		return []wire.Host{{HostID: h.HostID, Generation: h.Generation, Timestamp: h.Timestamp,
			IOTimeout: h.IOTimeout, Flags: uint32(h.State)}}, nil
	}
	return []wire.Host{{HostID: st.HostID, Generation: st.HostGeneration, Flags: wire.HostUnknown}}, nil
}
