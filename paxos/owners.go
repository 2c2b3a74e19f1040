package paxos

import (
	"context"
	"fmt"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// Owner is one holder of a lease as read_resource_owners reports it (a
// sanlk_host).
type Owner struct {
	HostID     uint64
	Generation uint64
	Timestamp  uint64 // leader timestamp for the exclusive owner, 0 for shared holders
	IOTimeout  uint32 // always 0
	Flags      uint32 // always 0
}

// Owners is the result of ReadResourceOwners.
type Owners struct {
	Lver     uint64
	Shared   bool // some mode block is SHARED (SANLK_RES_SHARED in the reply)
	Owners   []Owner
	Geometry diskfmt.Geometry
}

// ResourceOwners lists the holders found in one full-area buffer (docs/paxos.md
// "read_resource_owners" step 3): the leader owner if the leader is held, then every host
// 1..N with a SHARED mode block, except the leader owner.
func ResourceOwners(buf []byte, ld *diskfmt.Leader, ss int) Owners {
	res := Owners{Lver: ld.Lver}
	held := ld.Timestamp != 0 && ld.OwnerID != 0
	if held {
		res.Owners = append(res.Owners, Owner{HostID: ld.OwnerID, Generation: ld.OwnerGeneration, Timestamp: ld.Timestamp})
	}
	for id := uint64(1); id <= ld.NumHosts; id++ {
		s := SlotAt(buf, ss, id)
		if s.Mode.Flags&diskfmt.ModeShared == 0 {
			continue
		}
		res.Shared = true
		if held && s.HostID == ld.OwnerID {
			continue
		}
		res.Owners = append(res.Owners, Owner{HostID: s.HostID, Generation: s.Mode.Generation})
	}
	return res
}

// ReadResourceOwners reads a lease's whole area from one device (disk 0)
// and lists its holders (docs/paxos.md "read_resource_owners"). Sizes come from flags
// (diskfmt.FlagSector*/FlagAlign*); without them 512 and its legacy align are
// tried, and the area is read again with the leader's sizes if they differ.
// Given sizes that differ from the leader's fail with -EINVAL. Both names
// must match the leader.
func ReadResourceOwners(ctx context.Context, dev diskfmt.Device, off int64, space, name string, flags uint32) (Owners, error) {
	ss, align := diskfmt.SectorFromFlags(flags), diskfmt.AlignFromFlags(flags)
	given := ss != 0 || align != 0
	if ss == 0 {
		ss = diskfmt.SectorSize512
	}
	if align == 0 {
		align = diskfmt.LegacyAlign(ss)
	}
	for pass := 0; ; pass++ {
		b, err := diskio.ReadBuf(ctx, dev, align, off)
		if err != nil {
			return Owners{}, wrap("read_resource_owners", ioErr(err, rescode.ErrEIO), nil)
		}
		res, again, err := resourceOwners(b.Bytes(), space, name, ss, align, given || pass > 0)
		b.Release()
		if again {
			ss, align = res.Geometry.SectorSize, res.Geometry.AlignSize
			continue
		}
		return res, err
	}
}

// resourceOwners decodes one read of ReadResourceOwners; again asks for a
// second read with the sizes in res.Geometry.
func resourceOwners(buf []byte, space, name string, ss, align int, fixed bool) (Owners, bool, error) {
	ld, err := diskfmt.VerifyPaxos(buf, space, name, 0)
	if err != nil {
		return Owners{}, false, wrap("read_resource_owners", err, nil)
	}
	g, err := diskfmt.GeometryFromLeader(&ld)
	if err != nil {
		return Owners{}, false, wrap("read_resource_owners", err, &ld)
	}
	if g.SectorSize != ss || g.AlignSize != align {
		if fixed {
			return Owners{}, false, wrap("read_resource_owners",
				fmt.Errorf("lease sizes %v, asked %d/%d: %w", g, ss, align, rescode.ErrEINVAL), &ld)
		}
		return Owners{Geometry: g}, true, nil
	}
	res := ResourceOwners(buf, &ld, ss)
	res.Geometry = g
	return res, false, nil
}

// ReadResource reads a lease's leader from one device (docs/paxos.md "read_resource"): 4096
// bytes when flags carry no sector size, else one sector of the given size.
// Empty names are taken from the leader, so only given names can mismatch.
// It returns the leader and flags with the size bits replaced by the
// lease's.
func ReadResource(ctx context.Context, dev diskfmt.Device, off int64, space, name string, flags uint32) (diskfmt.Leader, uint32, error) {
	n := diskfmt.SectorFromFlags(flags)
	if n == 0 {
		n = 4096
	}
	buf := make([]byte, n)
	if err := dev.ReadAt(ctx, buf, off); err != nil {
		return diskfmt.Leader{}, flags, wrap("read_resource", ioErr(err, rescode.ErrEIO), nil)
	}
	raw, err := diskfmt.DecodeLeader(buf)
	if err != nil {
		return raw, flags, wrap("read_resource", err, nil)
	}
	if space == "" {
		space = diskfmt.NameString(raw.SpaceName[:])
	}
	if name == "" {
		name = diskfmt.NameString(raw.ResourceName[:])
	}
	ld, err := diskfmt.VerifyPaxos(buf, space, name, 0)
	if err != nil {
		return ld, flags, wrap("read_resource", err, nil)
	}
	const sizeBits = diskfmt.FlagSector512 | diskfmt.FlagSector4K | diskfmt.FlagAlign1M | diskfmt.FlagAlign2M |
		diskfmt.FlagAlign4M | diskfmt.FlagAlign8M
	if g, err := diskfmt.GeometryFromLeader(&ld); err == nil {
		flags = flags&^sizeBits | diskfmt.SizeFlags(g)
	}
	return ld, flags, nil
}

// TRFFail is SANLK_TRF_FAIL: some owner may still be alive.
const TRFFail = 0x1

// TestResourceOwners is sanlock_test_resource_owners (docs/paxos.md "test_resource_owners"): given
// the owners of a lease and the lockspace's get_hosts list, may an owner
// still hold it? It returns TRFFail in flags when one might, and -EINVAL
// when an owner's generation is newer than the host's or a state is unknown.
func TestResourceOwners(owners []Owner, hosts []delta.HostInfo) (uint32, error) {
	var flags uint32
	for _, o := range owners {
		var h *delta.HostInfo
		for i := range hosts {
			if hosts[i].HostID == o.HostID {
				h = &hosts[i]
				break
			}
		}
		switch {
		case h == nil:
		case h.Generation > o.Generation:
		case h.Generation < o.Generation:
			return flags, rescode.ErrEINVAL
		case h.State == delta.HostFree || h.State == delta.HostDead:
		case h.State == delta.HostLive || h.State == delta.HostFail || h.State == delta.HostUnknown:
			flags |= TRFFail
		default:
			return flags, rescode.ErrEINVAL
		}
	}
	return flags, nil
}
