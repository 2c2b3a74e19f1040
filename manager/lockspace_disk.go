package manager

import (
	"context"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// ioTimeoutCtx bounds one daemon-side disk operation.
func ioTimeoutCtx(ctx context.Context, secs int) (context.Context, context.CancelFunc) {
	if secs <= 0 {
		secs = DefaultIOTimeout
	}
	return context.WithTimeout(ctx, time.Duration(secs)*time.Second)
}

// WriteLockspace initialises the delta leases of ls (WRITE_LOCKSPACE,
// docs/protocol.md "Commands" #18); io is the io_timeout written into the
// leases (0: the daemon's io_timeout, as in 3.9.5 and 5.1.1).
func (m *Lockspaces) WriteLockspace(ctx context.Context, ls wire.Lockspace, io uint32) error {
	if ls.Disk.Path == "" {
		return rescode.ErrENODEV
	}
	if io == 0 {
		// The daemon's -o / io_timeout, as 3.9.5 and 5.1.1 (measured: a
		// daemon started with -o 3 wrote 3); 3.8.5 ignores -o and writes
		// 10, which is also our default.
		io = uint32(m.defaultIOTimeout())
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return rescode.ErrENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, m.conf().WriteInitIOTimeout)
	defer cancel()
	err = diskfmt.WriteLockspace(ioctx, dev, int64(ls.Disk.Offset), ls.Flags, ls.Name, uint16(io), m.conf().DeltaVersion)
	return resultErr(err)
}

// ReadLockspace reads the delta lease of host_id (1 when 0) of ls
// (READ_LOCKSPACE, docs/protocol.md "Commands" #20): the lockspace with its
// name, size flags and the 5.x marks (SANLK_LSF_NO_TIMEOUT,
// SANLK_LSF_USING_CAW), and the lease's io_timeout. The lockspace is
// returned on error too.
func (m *Lockspaces) ReadLockspace(ctx context.Context, ls wire.Lockspace) (wire.Lockspace, uint32, error) {
	if ls.HostID == 0 {
		ls.HostID = 1
	}
	if ls.Disk.Path == "" {
		return ls, 0, rescode.ErrENODEV
	}
	dev, err := m.cfg.Open(ls.Disk.Path)
	if err != nil {
		return ls, 0, rescode.ErrENODEV
	}
	defer dev.Close()
	ioctx, cancel := ioTimeoutCtx(ctx, DefaultIOTimeout)
	defer cancel()
	off := int64(ls.Disk.Offset)
	g, ok := diskfmt.GeometryFromFlags(ls.Flags)
	if !ok {
		l, err := diskfmt.ProbeLeader(ioctx, dev, off)
		if err != nil {
			return ls, 0, resultErr(err)
		}
		switch {
		case l.Magic != diskfmt.DeltaMagic:
			return ls, 0, rescode.ErrLeaderMagic
		case !diskfmt.DeltaVersionKnown(l.Version):
			return ls, 0, rescode.ErrLeaderVersion
		}
		if g, err = diskfmt.GeometryFromLeader(&l); err != nil {
			return ls, 0, rescode.ErrEINVAL
		}
	}
	name := ls.Name
	raw, err := diskfmt.ReadSector(ioctx, dev, off+diskfmt.DeltaSectorOffset(ls.HostID, g.SectorSize), g.SectorSize)
	if err != nil {
		return ls, 0, resultErr(err)
	}
	if name == "" {
		l, _ := diskfmt.DecodeLeader(raw)
		name = diskfmt.NameString(l.SpaceName[:])
	}
	l, err := diskfmt.VerifyDelta(raw, name)
	if err != nil {
		return ls, 0, resultErr(err)
	}
	ls.Name = name
	ls.Flags = lsFlagsOf(g, &l) // 5.x marks show as NO_TIMEOUT and USING_CAW, as 5.1.1 answers
	return ls, uint32(l.IOTimeout), nil
}
