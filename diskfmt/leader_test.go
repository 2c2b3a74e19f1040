package diskfmt_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

var le = binary.LittleEndian

// distinctLeader has a different, recognisable value in every field.
func distinctLeader() diskfmt.Leader {
	return diskfmt.Leader{
		Magic:           0x11223344,
		Version:         0x55667788,
		Flags:           0x99aabbcc,
		SectorSize:      0xddeeff01,
		NumHosts:        0x0102030405060708,
		MaxHosts:        0x1112131415161718,
		OwnerID:         0x2122232425262728,
		OwnerGeneration: 0x3132333435363738,
		Lver:            0x4142434445464748,
		SpaceName:       diskfmt.MustName("space-name-0123456789"),
		ResourceName:    diskfmt.MustName("resource-name-abcdefghijklmnopqrstuvwxyz"),
		Timestamp:       0x5152535455565758,
		Unused1:         0x6162636465666768,
		Checksum:        0x71727374,
		Unused2:         0x8182,
		IOTimeout:       0x9192,
		WriteID:         0xa1a2a3a4a5a6a7a8,
		WriteGeneration: 0xb1b2b3b4b5b6b7b8,
		WriteTimestamp:  0xc1c2c3c4c5c6c7c8,
	}
}

// TestLeaderFieldOffsets checks each field's exact byte position (docs/ondisk.md
// "Leader record") and that Encode touches only bytes [0,200).
func TestLeaderFieldOffsets(t *testing.T) {
	l := distinctLeader()
	b := bytes.Repeat([]byte{0xEE}, 512)
	l.Encode(b)

	u32 := func(off int) uint32 { return le.Uint32(b[off:]) }
	u64 := func(off int) uint64 { return le.Uint64(b[off:]) }
	assert.Equal(t, l.Magic, u32(0))
	assert.Equal(t, l.Version, u32(4))
	assert.Equal(t, l.Flags, u32(8))
	assert.Equal(t, l.SectorSize, u32(12))
	assert.Equal(t, l.NumHosts, u64(16))
	assert.Equal(t, l.MaxHosts, u64(24))
	assert.Equal(t, l.OwnerID, u64(32))
	assert.Equal(t, l.OwnerGeneration, u64(40))
	assert.Equal(t, l.Lver, u64(48))
	assert.Equal(t, l.SpaceName[:], b[56:104])
	assert.Equal(t, l.ResourceName[:], b[104:152])
	assert.Equal(t, l.Timestamp, u64(152))
	assert.Equal(t, l.Unused1, u64(160))
	assert.Equal(t, l.Checksum, u32(168))
	assert.Equal(t, l.Unused2, le.Uint16(b[172:]))
	assert.Equal(t, l.IOTimeout, le.Uint16(b[174:]))
	assert.Equal(t, l.WriteID, u64(176))
	assert.Equal(t, l.WriteGeneration, u64(184))
	assert.Equal(t, l.WriteTimestamp, u64(192))
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 512-200), b[200:], "Encode wrote past byte 200")

	// Little-endian, whatever the host: the magic's low byte comes first.
	assert.Equal(t, []byte{0x44, 0x33, 0x22, 0x11}, b[0:4])

	// Every one of the 200 bytes is some field's (no hidden padding).
	z := make([]byte, 200)
	(&diskfmt.Leader{}).Encode(z)
	assert.Equal(t, make([]byte, 200), z)
	nonzero := 0
	for _, c := range b[:200] {
		if c != 0 {
			nonzero++
		}
	}
	assert.Greater(t, nonzero, 150)
}

func TestLeaderRoundTrip(t *testing.T) {
	l := distinctLeader()
	var b [diskfmt.LeaderSize]byte
	l.Encode(b[:])
	got, err := diskfmt.DecodeLeader(b[:])
	require.NoError(t, err)
	assert.Equal(t, l, got)

	var b2 [diskfmt.LeaderSize]byte
	got.Encode(b2[:])
	assert.Equal(t, b, b2)

	// Seal stores the checksum it computed over the encoded bytes.
	s := l
	s.Seal(b[:])
	assert.Equal(t, diskfmt.Checksum(b[:168]), s.Checksum)
	assert.Equal(t, s.Checksum, le.Uint32(b[168:]))
	assert.Equal(t, s.Checksum, l.ComputeChecksum())

	_, err = diskfmt.DecodeLeader(b[:199])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func sealed(l diskfmt.Leader) []byte {
	b := make([]byte, 512)
	l.Seal(b)
	return b
}

func deltaLeader(space string) diskfmt.Leader {
	return diskfmt.Leader{
		Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, Flags: 0x10, SectorSize: 512,
		MaxHosts: 1, SpaceName: diskfmt.MustName(space), IOTimeout: 10,
	}
}

func paxosLeader(space, res string, numHosts uint64) diskfmt.Leader {
	return diskfmt.Leader{
		Magic: diskfmt.PaxosMagic, Version: diskfmt.PaxosVersion, Flags: 0x10, SectorSize: 512,
		NumHosts: numHosts, MaxHosts: 2000, SpaceName: diskfmt.MustName(space), ResourceName: diskfmt.MustName(res),
	}
}

// corrupt flips one checksum byte of a sealed sector.
func corrupt(b []byte) []byte {
	c := append([]byte(nil), b...)
	c[168] ^= 0xFF
	return c
}

func TestVerifyDelta(t *testing.T) {
	good := deltaLeader("LS1")
	with := func(f func(*diskfmt.Leader)) diskfmt.Leader { l := good; f(&l); return l }

	for _, tc := range []struct {
		name  string
		raw   []byte
		space string
		want  rescode.Code
	}{
		{"good", sealed(good), "LS1", 0},
		{"minor version differs", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x0003ffff })), "LS1", 0},
		{"minor version zero", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00030000 })), "LS1", 0},
		{"num_hosts/max_hosts/sector not checked", sealed(with(func(l *diskfmt.Leader) { l.NumHosts, l.MaxHosts, l.SectorSize = 9, 9, 7 })), "LS1", 0},
		{"io_timeout outside checksum", func() []byte {
			b := sealed(good)
			le.PutUint16(b[174:], 99)
			le.PutUint64(b[176:], 5)
			return b
		}(), "LS1", 0},
		{"zero sector", make([]byte, 512), "LS1", -223},
		{"paxos magic", sealed(with(func(l *diskfmt.Leader) { l.Magic = diskfmt.PaxosMagic })), "LS1", -223},
		{"magic before version", sealed(with(func(l *diskfmt.Leader) { l.Magic = 1; l.Version = 0x00040004 })), "LS1", -223},
		{"magic before checksum", corrupt(sealed(with(func(l *diskfmt.Leader) { l.Magic = 0 }))), "LS1", -223},
		{"major version 4 (5.x)", sealed(with(func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion40 })), "LS1", 0},
		{"major version 5 (5.x)", sealed(with(func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion50 })), "LS1", 0},
		{"major version 5 minor", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00050007 })), "LS1", 0},
		{"major version 6", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00060000 })), "LS1", -224},
		{"major version 2 (5.x takes it)", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00020004 })), "LS1", -224},
		{"major version 0", sealed(with(func(l *diskfmt.Leader) { l.Version = 0 })), "LS1", -224},
		{"5.x flag bits", sealed(with(func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderNewFlags; l.Unused1 = diskfmt.DeadExtMark })), "LS1", 0},
		{"paxos version", sealed(with(func(l *diskfmt.Leader) { l.Version = diskfmt.PaxosVersion })), "LS1", -224},
		{"version before name", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00020004 })), "OTHER", -224},
		{"name", sealed(good), "LS2", -226},
		{"name prefix", sealed(good), "LS", -226},
		{"name longer", sealed(good), "LS10", -226},
		{"name before checksum", corrupt(sealed(good)), "LS2", -226},
		{"checksum", corrupt(sealed(good)), "LS1", -229},
		{"checksum covers flags", func() []byte { b := sealed(good); b[8] ^= 1; return b }(), "LS1", -229},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := diskfmt.VerifyDelta(tc.raw, tc.space)
			assert.Equal(t, tc.want, rescode.CodeOf(err))
			// The decoded fields come back even on failure (read_leader prints them).
			d, _ := diskfmt.DecodeLeader(tc.raw)
			assert.Equal(t, d, l)
		})
	}
	_, err := diskfmt.VerifyDelta(make([]byte, 100), "LS1")
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func TestVerifyPaxos(t *testing.T) {
	good := paxosLeader("LS1", "RES1", 10)
	with := func(f func(*diskfmt.Leader)) diskfmt.Leader { l := good; f(&l); return l }

	for _, tc := range []struct {
		name       string
		raw        []byte
		space, res string
		host       uint64
		want       rescode.Code
	}{
		{"good", sealed(good), "LS1", "RES1", 1, 0},
		{"host equal num_hosts", sealed(good), "LS1", "RES1", 10, 0},
		{"host 0 skips num_hosts", sealed(with(func(l *diskfmt.Leader) { l.NumHosts = 0 })), "LS1", "RES1", 0, 0},
		{"minor version", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00060001 })), "LS1", "RES1", 1, 0},
		{"write_* outside checksum", func() []byte { b := sealed(good); b[190] = 7; b[173] = 1; return b }(), "LS1", "RES1", 1, 0},
		{"clear", sealed(with(func(l *diskfmt.Leader) { l.Magic = diskfmt.PaxosClear })), "LS1", "RES1", 1, -223},
		{"clear with bad everything", corrupt(sealed(with(func(l *diskfmt.Leader) { l.Magic = diskfmt.PaxosClear; l.Version = 0 }))), "X", "Y", 99, -223},
		{"delta magic", sealed(with(func(l *diskfmt.Leader) { l.Magic = diskfmt.DeltaMagic })), "LS1", "RES1", 1, -223},
		{"zero", make([]byte, 512), "LS1", "RES1", 1, -223},
		{"major version 7 (5.x)", sealed(with(func(l *diskfmt.Leader) { l.Version = diskfmt.PaxosVersion70 })), "LS1", "RES1", 1, 0},
		{"major version 7 minor", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00070004 })), "LS1", "RES1", 1, 0},
		{"major version 8", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00080000 })), "LS1", "RES1", 1, -224},
		{"major version 5 (5.x takes it)", sealed(with(func(l *diskfmt.Leader) { l.Version = 0x00050000 })), "LS1", "RES1", 1, -224},
		{"5.x flag bits", sealed(with(func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderNewFlags })), "LS1", "RES1", 1, 0},
		{"delta version", sealed(with(func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion })), "X", "RES1", 1, -224},
		{"space", sealed(good), "LS2", "RES1", 1, -226},
		{"space before resource", sealed(good), "LS2", "RES2", 1, -226},
		{"resource", sealed(good), "LS1", "RES2", 1, -227},
		{"resource before num_hosts", sealed(good), "LS1", "RES", 11, -227},
		{"num_hosts", sealed(good), "LS1", "RES1", 11, -228},
		{"num_hosts before checksum", corrupt(sealed(good)), "LS1", "RES1", 11, -228},
		{"checksum", corrupt(sealed(good)), "LS1", "RES1", 1, -229},
		{"checksum host 0", corrupt(sealed(good)), "LS1", "RES1", 0, -229},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := diskfmt.VerifyPaxos(tc.raw, tc.space, tc.res, tc.host)
			assert.Equal(t, tc.want, rescode.CodeOf(err))
		})
	}
}

// TestNameSemantics: names are compared strncmp-48 style; a 48-byte name has
// no NUL; bytes after a NUL are ignored by the comparison but covered by the
// checksum (docs/ondisk.md "Conventions", "Lockspace (delta leases)").
func TestNameSemantics(t *testing.T) {
	n48 := strings.Repeat("n", 48)
	n, err := diskfmt.Name(n48)
	require.NoError(t, err)
	assert.Equal(t, []byte(n48), n[:], "48-byte name fills the field, no terminator")
	_, err = diskfmt.Name(n48 + "x")
	assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err))
	assert.Equal(t, n, diskfmt.MustName(n48+"xyz"), "MustName truncates at 48")
	assert.Equal(t, n48, diskfmt.NameString(n[:]))

	assert.True(t, diskfmt.NameEqual(n[:], n48))
	assert.True(t, diskfmt.NameEqual(n[:], n48+"extra"), "strncmp(…, 48) ignores bytes past 48")
	assert.False(t, diskfmt.NameEqual(n[:], n48[:47]))
	assert.True(t, diskfmt.NameEqual([]byte("abc\x00garbage"), "abc"))
	assert.True(t, diskfmt.NameEqual([]byte("abc\x00garbage"), "abc\x00other"))
	assert.False(t, diskfmt.NameEqual([]byte("abc\x00"), "ab"))
	assert.False(t, diskfmt.NameEqual([]byte("ab\x00"), "abc"))
	assert.True(t, diskfmt.NameEqual(make([]byte, 48), ""))

	// A 48-byte space name verifies; so does the same name followed by junk
	// after a NUL inside the stored field.
	l := deltaLeader(n48)
	_, err = diskfmt.VerifyDelta(sealed(l), n48)
	assert.NoError(t, err)
	l = deltaLeader("LS1")
	copy(l.SpaceName[4:], "leftover")
	raw := sealed(l)
	_, err = diskfmt.VerifyDelta(raw, "LS1")
	assert.NoError(t, err)
	// The junk is under the checksum: changing it is detected.
	raw[60] ^= 1
	_, err = diskfmt.VerifyDelta(raw, "LS1")
	assert.Equal(t, rescode.ErrLeaderChecksum, rescode.CodeOf(err))

	p := paxosLeader(n48, n48, 5)
	_, err = diskfmt.VerifyPaxos(sealed(p), n48, n48, 1)
	assert.NoError(t, err)
}
