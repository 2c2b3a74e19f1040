package diskfmt_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// crc32cRaw is the bitwise reference CRC of docs/ondisk.md "Checksum": reflected
// Castagnoli polynomial, caller-chosen initial register, no final xor. It is
// deliberately the slow, obvious definition.
func crc32cRaw(crc uint32, data []byte) uint32 {
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// TestChecksumStandardSanity confirms the polynomial with the standard
// CRC-32C parameters (init and final xor 0xFFFFFFFF): "123456789" →
// 0xE3069283 (docs/ondisk.md "Checksum").
func TestChecksumStandardSanity(t *testing.T) {
	got := crc32cRaw(0xFFFFFFFF, []byte("123456789")) ^ 0xFFFFFFFF
	assert.Equal(t, uint32(0xE3069283), got)
	// sanlock's variant of the same input, from the reference definition.
	assert.Equal(t, crc32cRaw(0xFFFFFFFE, []byte("123456789")), diskfmt.Checksum([]byte("123456789")))
}

func TestChecksumMatchesBitwiseReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		require.Equal(t, crc32cRaw(0xFFFFFFFE, b), diskfmt.Checksum(b), "len %d", n)
	}
	// Empty input: the register is returned unchanged (no final xor).
	assert.Equal(t, uint32(0xFFFFFFFE), diskfmt.Checksum(nil))
}

// TestChecksumVectors are the four vectors of docs/ondisk.md "Checksum", read from disks
// the real binary wrote. Unlisted fields are zero.
func TestChecksumVectors(t *testing.T) {
	freshDelta := diskfmt.Leader{
		Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, Flags: 0x10, SectorSize: 512,
		NumHosts: 0, MaxHosts: 1, SpaceName: diskfmt.MustName("LS1"), IOTimeout: 10,
	}
	acquired := freshDelta
	acquired.OwnerID = 3
	acquired.OwnerGeneration = 1
	acquired.Timestamp = 457
	acquired.ResourceName = diskfmt.MustName("b036f6a7-3dac-4b62-b095-2b5db03af7f5.vm")
	freshPaxos := diskfmt.Leader{
		Magic: diskfmt.PaxosMagic, Version: diskfmt.PaxosVersion, Flags: 0x10, SectorSize: 512,
		NumHosts: 2000, MaxHosts: 2000, SpaceName: diskfmt.MustName("LS1"), ResourceName: diskfmt.MustName("RES1"),
	}
	for _, tc := range []struct {
		name string
		l    diskfmt.Leader
		want uint32
	}{
		{"delta fresh", freshDelta, 0x4dba1e1e},
		{"delta acquired", acquired, 0xaacc5d19},
		{"paxos fresh", freshPaxos, 0x1d6a1592},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.l.ComputeChecksum())
			var b [diskfmt.LeaderSize]byte
			l := tc.l
			l.Seal(b[:])
			assert.Equal(t, tc.want, l.Checksum)
			assert.Equal(t, tc.want, crc32cRaw(0xFFFFFFFE, b[:diskfmt.LeaderChecksumLen]))
		})
	}

	t.Run("dblock", func(t *testing.T) {
		d := diskfmt.Dblock{Mbal: 1, Bal: 1, Inp: 1, Inp2: 1, Inp3: 505, Lver: 1}
		var b [diskfmt.DblockSize]byte
		d.Seal(b[:])
		assert.Equal(t, uint32(0x0bc2fe12), d.Checksum)
		assert.Equal(t, uint32(0x0bc2fe12), crc32cRaw(0xFFFFFFFE, b[:diskfmt.DblockChecksumLen]))
	})
}

// TestChecksumCoverage: io_timeout, unused2 and write_* are outside the
// leader checksum; every byte of [0,168) is inside it.
func TestChecksumCoverage(t *testing.T) {
	l := diskfmt.Leader{Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, SpaceName: diskfmt.MustName("X")}
	base := l.ComputeChecksum()
	m := l
	m.IOTimeout, m.Unused2, m.WriteID, m.WriteGeneration, m.WriteTimestamp = 77, 5, 1, 2, 3
	m.Checksum = 0x12345678
	assert.Equal(t, base, m.ComputeChecksum(), "fields at 168.. must not change the checksum")

	var b [diskfmt.LeaderSize]byte
	l.Encode(b[:])
	for i := range diskfmt.LeaderChecksumLen {
		c := b
		c[i] ^= 0x01
		require.NotEqual(t, base, diskfmt.Checksum(c[:diskfmt.LeaderChecksumLen]), "byte %d", i)
	}
}
