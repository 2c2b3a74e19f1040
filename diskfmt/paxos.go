package diskfmt

import (
	"encoding/binary"

	"github.com/gosanlock/gosanlock/rescode"
)

// Paxos lease layout: sector 0 leader, sector 1 request record, sector
// 2+(h-1) the dblock (and mode block) of host h, sector 2002 the LVB.
const (
	DblockSize        = 56
	DblockChecksumLen = 48
	DblockReleased    = 0x1 // dblock flags: the host released the lease

	ModeBlockOffset = 128 // mode block position inside a dblock sector
	ModeBlockSize   = 16
	ModeShared      = 0x1 // mode block flags: held shared

	RequestSize = 24

	// LVBSector is the sector (from the lease start) of the lock value block,
	// for every geometry, even where it lies outside the lease's area.
	LVBSector = 2002

	// Request force modes.
	ReqForce    = 1
	ReqGraceful = 2
)

// DblockSector is the sector index of host hostID's dblock.
func DblockSector(hostID uint64) int64 { return int64(hostID) + 1 }

// Dblock is a host's paxos ballot state for one lease.
type Dblock struct {
	Mbal     uint64
	Bal      uint64
	Inp      uint64 // proposed owner host_id
	Inp2     uint64 // proposed owner generation
	Inp3     uint64 // proposed owner timestamp
	Lver     uint64
	Checksum uint32
	Flags    uint32 // not covered by the checksum
}

// Encode writes the 56 stored bytes, with the Checksum field as it is.
func (d *Dblock) Encode(b []byte) {
	_ = b[DblockSize-1]
	le := binary.LittleEndian
	le.PutUint64(b[0:], d.Mbal)
	le.PutUint64(b[8:], d.Bal)
	le.PutUint64(b[16:], d.Inp)
	le.PutUint64(b[24:], d.Inp2)
	le.PutUint64(b[32:], d.Inp3)
	le.PutUint64(b[40:], d.Lver)
	le.PutUint32(b[48:], d.Checksum)
	le.PutUint32(b[52:], d.Flags)
}

// Seal computes the checksum over [0,48), stores it and encodes into b.
func (d *Dblock) Seal(b []byte) {
	d.Encode(b)
	d.Checksum = Checksum(b[:DblockChecksumLen])
	binary.LittleEndian.PutUint32(b[48:], d.Checksum)
}

// IsZero reports a never-used dblock, which is valid without a checksum.
func (d *Dblock) IsZero() bool {
	return d.Checksum == 0 && d.Mbal == 0 && d.Bal == 0 && d.Inp == 0 && d.Lver == 0
}

// DecodeDblock parses a dblock and checks its checksum: a non-zero dblock
// whose checksum does not match returns ErrDblockChecksum (with the decoded
// fields). A short buffer returns ErrEIO.
func DecodeDblock(b []byte) (Dblock, error) {
	var d Dblock
	if len(b) < DblockSize {
		return d, rescode.ErrEIO
	}
	le := binary.LittleEndian
	d.Mbal = le.Uint64(b[0:])
	d.Bal = le.Uint64(b[8:])
	d.Inp = le.Uint64(b[16:])
	d.Inp2 = le.Uint64(b[24:])
	d.Inp3 = le.Uint64(b[32:])
	d.Lver = le.Uint64(b[40:])
	d.Checksum = le.Uint32(b[48:])
	d.Flags = le.Uint32(b[52:])
	if !d.IsZero() && Checksum(b[:DblockChecksumLen]) != d.Checksum {
		return d, rescode.ErrDblockChecksum
	}
	return d, nil
}

// ModeBlock records a shared holder in the host's dblock sector.
type ModeBlock struct {
	Flags      uint32
	Generation uint64
}

// Encode writes the 16 bytes of the mode block (padding zero).
func (m *ModeBlock) Encode(b []byte) {
	_ = b[ModeBlockSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], m.Flags)
	le.PutUint32(b[4:], 0)
	le.PutUint64(b[8:], m.Generation)
}

// DecodeModeBlock parses the 16 bytes of a mode block; padding is ignored.
func DecodeModeBlock(b []byte) (ModeBlock, error) {
	if len(b) < ModeBlockSize {
		return ModeBlock{}, rescode.ErrEIO
	}
	le := binary.LittleEndian
	return ModeBlock{Flags: le.Uint32(b[0:]), Generation: le.Uint64(b[8:])}, nil
}

// Request is the request_record in sector 1 of a paxos lease.
type Request struct {
	Magic     uint32
	Version   uint32
	Lver      uint64
	ForceMode uint32
}

// NewRequest returns an empty, valid request record.
func NewRequest() Request { return Request{Magic: RequestMagic, Version: RequestVersion} }

// Encode writes the 24 bytes of the record; the 4 padding bytes are zero.
func (r *Request) Encode(b []byte) {
	_ = b[RequestSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], r.Magic)
	le.PutUint32(b[4:], r.Version)
	le.PutUint64(b[8:], r.Lver)
	le.PutUint32(b[16:], r.ForceMode)
	le.PutUint32(b[20:], 0)
}

// DecodeRequest parses and validates a request record: wrong magic gives
// ErrRequestMagic, wrong major version ErrRequestVersion. Padding is ignored.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if len(b) < RequestSize {
		return r, rescode.ErrEIO
	}
	le := binary.LittleEndian
	r.Magic = le.Uint32(b[0:])
	r.Version = le.Uint32(b[4:])
	r.Lver = le.Uint64(b[8:])
	r.ForceMode = le.Uint32(b[16:])
	switch {
	case r.Magic != RequestMagic:
		return r, rescode.ErrRequestMagic
	case r.Version&VersionMajorMask != RequestVersion&VersionMajorMask:
		return r, rescode.ErrRequestVersion
	}
	return r, nil
}

// PaxosInit describes a resource lease to write with InitPaxosArea.
type PaxosInit struct {
	Geometry
	SpaceName, ResourceName string
	NumHosts                uint64 // 0 or > MaxHosts means MaxHosts
	// Clear writes an invalidated lease (PAXOS_DISK_CLEAR) that readers
	// reject until it is initialised again; ClearTime is recorded in
	// write_timestamp (the writer's monotonic seconds).
	Clear     bool
	ClearTime uint64
	// Version is the leader version written: PaxosVersion (also when 0)
	// or PaxosVersion70.
	Version uint32
}

// InitPaxosArea builds the align-size area that initialises a resource lease:
// leader in sector 0, an empty request record in sector 1, zeros elsewhere.
func InitPaxosArea(p PaxosInit) ([]byte, error) {
	space, err := Name(p.SpaceName)
	if err != nil {
		return nil, err
	}
	res, err := Name(p.ResourceName)
	if err != nil {
		return nil, err
	}
	num := p.NumHosts
	if num == 0 || num > uint64(p.MaxHosts) {
		num = uint64(p.MaxHosts)
	}
	version := p.Version
	if version == 0 {
		version = PaxosVersion
	}
	l := Leader{
		Magic:        PaxosMagic,
		Version:      version,
		Flags:        AlignFlag(p.AlignSize),
		SectorSize:   uint32(p.SectorSize),
		NumHosts:     num,
		MaxHosts:     uint64(p.MaxHosts),
		SpaceName:    space,
		ResourceName: res,
	}
	if p.Clear {
		l.Magic = PaxosClear
		l.WriteTimestamp = p.ClearTime
	}
	buf := make([]byte, p.AlignSize)
	l.Seal(buf)
	req := NewRequest()
	req.Encode(buf[p.SectorSize:])
	return buf, nil
}
