package diskfmt

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/gosanlock/gosanlock/rescode"
)

// Magic numbers and versions. They are part of the on-disk format and must
// not change. A version is major<<16 | minor; readers look at the major
// only (docs/ondisk.md "Format versions").
const (
	DeltaMagic uint32 = 0x12212010
	// DeltaVersion (3.4) is the delta lease version of sanlock 3.x, which
	// reads no other; init writes it unless configured otherwise.
	DeltaVersion uint32 = 0x00030004
	// DeltaVersion40 and DeltaVersion50 are the delta lease versions 5.x
	// writes (5.0 by default, 4.0 when configured). Their records have the
	// layout of 3.4.
	DeltaVersion40 uint32 = 0x00040000
	DeltaVersion50 uint32 = 0x00050000
	PaxosMagic     uint32 = 0x06152010
	PaxosClear     uint32 = 0x11282016
	// PaxosVersion (6.4) is the paxos leader version of sanlock 3.x;
	// PaxosVersion70 the one 5.x writes by default, same layout.
	PaxosVersion   uint32 = 0x00060004
	PaxosVersion70 uint32 = 0x00070000
	RequestMagic   uint32 = 0x08292011
	// RequestVersion is the request_record version.
	RequestVersion uint32 = 0x00010001
	RindexMagic    uint32 = 0x01042018
	RindexVersion  uint32 = 0x00010002

	// VersionMajorMask selects the major half of a version field; readers
	// compare only that half.
	VersionMajorMask uint32 = 0xFFFF0000
)

// Leader flags. ShortHold and the align bits are sanlock 3.x's; NoTimeout,
// DeadExt and CAW are written by 5.x (docs/ondisk.md "Leader flags"): we
// carry them through every rewrite and expose them. Acting on them is
// limited to refusals: a lease marked CAW is not taken, an owner with
// NoTimeout is never dead by time, our own slot marked DeadExt stops us.
const (
	LeaderShortHold uint32 = 0x1
	LeaderNoTimeout uint32 = 0x2
	LeaderDeadExt   uint32 = 0x4
	LeaderCAW       uint32 = 0x8
	LeaderAlign1M   uint32 = 0x10
	LeaderAlign2M   uint32 = 0x20
	LeaderAlign4M   uint32 = 0x40
	LeaderAlign8M   uint32 = 0x80

	// LeaderNewFlags are the bits 3.x never writes.
	LeaderNewFlags = LeaderNoTimeout | LeaderDeadExt | LeaderCAW

	// DeadExtMark is what 5.x writes into Unused1 (byte 160) of a host's
	// delta lease together with LeaderDeadExt when the writer is host_id 1
	// of generation 1 (DeadExtFrom).
	DeadExtMark uint64 = 0x00010001
)

// DeadExtFrom is the Unused1 value 5.1.1 writes with LeaderDeadExt:
// the writer's host_id in bits 16–31 and its generation in bits 0–15
// (seen: host 1 generation 1 wrote 0x00010001, host 2 generation 6
// 0x00020006; what happens beyond 16 bits is not known).
func DeadExtFrom(hostID, generation uint64) uint64 {
	return (hostID&0xffff)<<16 | generation&0xffff
}

// leaderFlagNames are the names sanlock 5.x prints for the leader flags,
// in its order.
var leaderFlagNames = []struct {
	bit  uint32
	name string
}{
	{LeaderShortHold, "SHORT_HOLD"},
	{LeaderNoTimeout, "NO_TIMEOUT"},
	{LeaderDeadExt, "DEAD_EXT"},
	{LeaderAlign1M, "ALIGN_1M"},
	{LeaderAlign2M, "ALIGN_2M"},
	{LeaderAlign4M, "ALIGN_4M"},
	{LeaderAlign8M, "ALIGN_8M"},
	{LeaderCAW, "CAW"},
}

// LeaderFlagNames returns the names of the known bits set in flags, in the
// order sanlock 5.x prints them; unknown bits have no name.
func LeaderFlagNames(flags uint32) []string {
	var names []string
	for _, f := range leaderFlagNames {
		if flags&f.bit != 0 {
			names = append(names, f.name)
		}
	}
	return names
}

// VersionMajor is the major half of a version field.
func VersionMajor(v uint32) uint32 { return v >> 16 }

// DeltaVersionKnown reports whether a delta lease of version v can be
// read: majors 3, 4 and 5, whose layouts are the same. Other majors give
// ErrLeaderVersion.
func DeltaVersionKnown(v uint32) bool {
	m := VersionMajor(v)
	return m >= 3 && m <= 5
}

// PaxosVersionKnown reports whether a paxos leader of version v can be
// read: majors 6 and 7.
func PaxosVersionKnown(v uint32) bool {
	m := VersionMajor(v)
	return m == 6 || m == 7
}

// NewFormat reports whether the leader is in a format only sanlock 5.x
// writes: a delta or paxos leader of a known version that is newer than
// 3.x's (delta 4.x, 5.x; paxos 7.x) or carries a 5.x flag bit
// (LeaderNewFlags). Leaders of unknown versions or magic are not.
func (l *Leader) NewFormat() bool {
	switch l.Magic {
	case DeltaMagic:
		return DeltaVersionKnown(l.Version) &&
			(VersionMajor(l.Version) > VersionMajor(DeltaVersion) || l.Flags&LeaderNewFlags != 0)
	case PaxosMagic, PaxosClear:
		return PaxosVersionKnown(l.Version) &&
			(VersionMajor(l.Version) > VersionMajor(PaxosVersion) || l.Flags&LeaderNewFlags != 0)
	}
	return false
}

// NoTimeout, DeadExt and CAW report the 5.x flag bits.
func (l *Leader) NoTimeout() bool { return l.Flags&LeaderNoTimeout != 0 }
func (l *Leader) DeadExt() bool   { return l.Flags&LeaderDeadExt != 0 }
func (l *Leader) CAW() bool       { return l.Flags&LeaderCAW != 0 }

// Sizes of the leader record.
const (
	LeaderSize        = 200 // bytes actually used
	LeaderChecksumLen = 168 // the checksum covers [0,168)
	LeaderCompareLen  = 152 // multi-disk leaders are compared over [0,152)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is sanlock's CRC-32C: reflected Castagnoli polynomial, initial
// register 0xFFFFFFFE, no final xor. crc32.Update inverts on entry and exit,
// so seeding it with 1 gives the 0xFFFFFFFE start and the outer ^ undoes the
// final inversion.
func Checksum(b []byte) uint32 {
	return ^crc32.Update(1, castagnoli, b)
}

// Leader is the leader_record that opens both delta-lease and paxos-lease
// sectors. For a delta lease WriteID, WriteGeneration and WriteTimestamp hold
// the host event (generation, event, data; printed as extra1..3).
type Leader struct {
	Magic           uint32
	Version         uint32
	Flags           uint32
	SectorSize      uint32
	NumHosts        uint64
	MaxHosts        uint64
	OwnerID         uint64
	OwnerGeneration uint64
	Lver            uint64
	SpaceName       [NameLen]byte
	ResourceName    [NameLen]byte
	Timestamp       uint64
	Unused1         uint64
	Checksum        uint32
	Unused2         uint16
	IOTimeout       uint16
	WriteID         uint64
	WriteGeneration uint64
	WriteTimestamp  uint64
}

// Encode writes the leader's 200 bytes into b[:200] exactly as stored,
// including the Checksum field as it is (see Seal).
func (l *Leader) Encode(b []byte) {
	_ = b[LeaderSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], l.Magic)
	le.PutUint32(b[4:], l.Version)
	le.PutUint32(b[8:], l.Flags)
	le.PutUint32(b[12:], l.SectorSize)
	le.PutUint64(b[16:], l.NumHosts)
	le.PutUint64(b[24:], l.MaxHosts)
	le.PutUint64(b[32:], l.OwnerID)
	le.PutUint64(b[40:], l.OwnerGeneration)
	le.PutUint64(b[48:], l.Lver)
	copy(b[56:104], l.SpaceName[:])
	copy(b[104:152], l.ResourceName[:])
	le.PutUint64(b[152:], l.Timestamp)
	le.PutUint64(b[160:], l.Unused1)
	le.PutUint32(b[168:], l.Checksum)
	le.PutUint16(b[172:], l.Unused2)
	le.PutUint16(b[174:], l.IOTimeout)
	le.PutUint64(b[176:], l.WriteID)
	le.PutUint64(b[184:], l.WriteGeneration)
	le.PutUint64(b[192:], l.WriteTimestamp)
}

// Seal computes the checksum over the encoded bytes, stores it in the leader
// and writes the final 200 bytes into b.
func (l *Leader) Seal(b []byte) {
	l.Encode(b)
	l.Checksum = Checksum(b[:LeaderChecksumLen])
	binary.LittleEndian.PutUint32(b[168:], l.Checksum)
}

// ComputeChecksum returns the checksum the leader's fields should carry.
func (l *Leader) ComputeChecksum() uint32 {
	var b [LeaderSize]byte
	l.Encode(b[:])
	return Checksum(b[:LeaderChecksumLen])
}

// DecodeLeader parses the first 200 bytes of b. It never fails on content;
// validation is separate (VerifyDelta, VerifyPaxos) because the tools print
// what they read even when it is invalid. It returns ErrEIO if b is short.
func DecodeLeader(b []byte) (Leader, error) {
	var l Leader
	if len(b) < LeaderSize {
		return l, rescode.ErrEIO
	}
	le := binary.LittleEndian
	l.Magic = le.Uint32(b[0:])
	l.Version = le.Uint32(b[4:])
	l.Flags = le.Uint32(b[8:])
	l.SectorSize = le.Uint32(b[12:])
	l.NumHosts = le.Uint64(b[16:])
	l.MaxHosts = le.Uint64(b[24:])
	l.OwnerID = le.Uint64(b[32:])
	l.OwnerGeneration = le.Uint64(b[40:])
	l.Lver = le.Uint64(b[48:])
	copy(l.SpaceName[:], b[56:104])
	copy(l.ResourceName[:], b[104:152])
	l.Timestamp = le.Uint64(b[152:])
	l.Unused1 = le.Uint64(b[160:])
	l.Checksum = le.Uint32(b[168:])
	l.Unused2 = le.Uint16(b[172:])
	l.IOTimeout = le.Uint16(b[174:])
	l.WriteID = le.Uint64(b[176:])
	l.WriteGeneration = le.Uint64(b[184:])
	l.WriteTimestamp = le.Uint64(b[192:])
	return l, nil
}

// checksumOK recomputes the checksum over the raw bytes (not a re-encoding,
// so bytes after a name's NUL count as stored).
func checksumOK(raw []byte) bool {
	return Checksum(raw[:LeaderChecksumLen]) == binary.LittleEndian.Uint32(raw[168:])
}

// VerifyDelta checks a delta-lease leader read from raw (at least 200
// bytes) in sanlock's order: magic, major version (DeltaVersionKnown),
// lockspace name, checksum.
func VerifyDelta(raw []byte, spaceName string) (Leader, error) {
	l, err := DecodeLeader(raw)
	if err != nil {
		return l, err
	}
	switch {
	case l.Magic != DeltaMagic:
		return l, rescode.ErrLeaderMagic
	case !DeltaVersionKnown(l.Version):
		return l, rescode.ErrLeaderVersion
	case !NameEqual(l.SpaceName[:], spaceName):
		return l, rescode.ErrLeaderLockspace
	case !checksumOK(raw):
		return l, rescode.ErrLeaderChecksum
	}
	return l, nil
}

// VerifyPaxos checks a paxos leader read from raw in sanlock's order: clear
// magic, magic, major version (PaxosVersionKnown), lockspace name, resource name, num_hosts
// against hostID (skipped when hostID is 0), checksum.
func VerifyPaxos(raw []byte, spaceName, resName string, hostID uint64) (Leader, error) {
	l, err := DecodeLeader(raw)
	if err != nil {
		return l, err
	}
	switch {
	case l.Magic == PaxosClear, l.Magic != PaxosMagic:
		return l, rescode.ErrLeaderMagic
	case !PaxosVersionKnown(l.Version):
		return l, rescode.ErrLeaderVersion
	case !NameEqual(l.SpaceName[:], spaceName):
		return l, rescode.ErrLeaderLockspace
	case !NameEqual(l.ResourceName[:], resName):
		return l, rescode.ErrLeaderResource
	case hostID != 0 && l.NumHosts < hostID:
		return l, rescode.ErrLeaderNumHosts
	case !checksumOK(raw):
		return l, rescode.ErrLeaderChecksum
	}
	return l, nil
}

// AlignFlag returns the LFL_ALIGN_* bit for an align size (0 if unknown).
func AlignFlag(align int) uint32 { return alignBits(align, LeaderAlign1M) }

// Name copies s into a 48-byte NUL-padded field. It returns ErrEINVAL when s
// is longer than 48 bytes; a name of exactly 48 bytes has no terminator.
func Name(s string) ([NameLen]byte, error) {
	var n [NameLen]byte
	if len(s) > NameLen {
		return n, rescode.ErrEINVAL
	}
	copy(n[:], s)
	return n, nil
}

// MustName is Name for names already known to fit; it truncates at 48.
func MustName(s string) [NameLen]byte {
	var n [NameLen]byte
	copy(n[:], s)
	return n
}

// NameString returns a name field up to its first NUL.
func NameString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// NameEqual compares a stored name field with s the way strncmp(…, 48) does:
// up to the first NUL, at most 48 bytes.
func NameEqual(field []byte, s string) bool {
	if i := indexNUL(s); i >= 0 {
		s = s[:i]
	}
	if len(s) > NameLen {
		s = s[:NameLen]
	}
	if len(field) > NameLen {
		field = field[:NameLen]
	}
	return NameString(field) == s
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}
