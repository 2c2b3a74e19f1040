package diskfmt_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// Init writes the version asked for and nothing else differs: a 5.x area
// is a 3.x area with another version field and checksum in each leader.
func TestInitVersions(t *testing.T) {
	for _, g := range []diskfmt.Geometry{mustGeo(t, 512, diskfmt.Align1M), mustGeo(t, 4096, diskfmt.Align2M)} {
		old, oldCommit, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "LS", IOTimeout: 10})
		require.NoError(t, err)
		for _, v := range []uint32{diskfmt.DeltaVersion40, diskfmt.DeltaVersion50} {
			area, commit, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "LS", IOTimeout: 10, Version: v})
			require.NoError(t, err)
			assert.Equal(t, v, binary.LittleEndian.Uint32(commit[4:]))
			for i := 0; i < g.MaxHosts; i++ {
				sec := area[i*g.SectorSize:]
				assert.Equal(t, v, binary.LittleEndian.Uint32(sec[4:]), "sector %d", i)
				if i > 0 {
					_, err := diskfmt.VerifyDelta(sec, "LS")
					require.NoError(t, err)
				}
			}
			assert.Equal(t, differingBytes(old, area), 6*g.MaxHosts, "version and checksum only")
			assert.Equal(t, differingBytes(oldCommit, commit), 6)
		}
		p := diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: "R"}
		oldRes, err := diskfmt.InitPaxosArea(p)
		require.NoError(t, err)
		p.Version = diskfmt.PaxosVersion70
		res, err := diskfmt.InitPaxosArea(p)
		require.NoError(t, err)
		l, err := diskfmt.VerifyPaxos(res, "LS", "R", 1)
		require.NoError(t, err)
		assert.Equal(t, diskfmt.PaxosVersion70, l.Version)
		assert.Equal(t, 6, differingBytes(oldRes, res))
	}
}

func differingBytes(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func mustGeo(t *testing.T, ss, align int) diskfmt.Geometry {
	g, ok := diskfmt.LookupGeometry(ss, align)
	require.True(t, ok)
	return g
}

func TestVersionsKnown(t *testing.T) {
	for v, ok := range map[uint32]bool{0: false, 0x00020004: false, 0x00030004: true, 0x00030000: true,
		0x00040000: true, 0x00050000: true, 0x0005ffff: true, 0x00060000: false, 0xffff0000: false} {
		assert.Equal(t, ok, diskfmt.DeltaVersionKnown(v), "delta %#x", v)
	}
	for v, ok := range map[uint32]bool{0: false, 0x00050000: false, 0x00060004: true, 0x00070000: true,
		0x00070004: true, 0x00080000: false} {
		assert.Equal(t, ok, diskfmt.PaxosVersionKnown(v), "paxos %#x", v)
	}
}

// The names and their order are those sanlock 5.1.1's read_leader prints.
func TestLeaderFlagNames(t *testing.T) {
	assert.Nil(t, diskfmt.LeaderFlagNames(0))
	assert.Nil(t, diskfmt.LeaderFlagNames(0x100))
	assert.Equal(t, []string{"ALIGN_1M", "CAW"}, diskfmt.LeaderFlagNames(0x18))
	assert.Equal(t, []string{"SHORT_HOLD", "NO_TIMEOUT", "DEAD_EXT", "ALIGN_1M", "ALIGN_2M", "ALIGN_4M", "ALIGN_8M", "CAW"},
		diskfmt.LeaderFlagNames(0xffffffff))
}

func TestNewFormat(t *testing.T) {
	d := diskfmt.Leader{Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, Flags: diskfmt.LeaderAlign1M}
	assert.False(t, d.NewFormat())
	d.Unused1 = diskfmt.DeadExtMark // alone it is a corruption to 3.x, not a 5.x format
	assert.False(t, d.NewFormat())
	for _, f := range []uint32{diskfmt.LeaderNoTimeout, diskfmt.LeaderDeadExt, diskfmt.LeaderCAW} {
		e := d
		e.Flags |= f
		assert.True(t, e.NewFormat(), "flag %#x", f)
	}
	for v, want := range map[uint32]bool{diskfmt.DeltaVersion40: true, diskfmt.DeltaVersion50: true, 0x00060000: false} {
		e := d
		e.Version = v
		assert.Equal(t, want, e.NewFormat(), "delta %#x", v)
	}
	p := diskfmt.Leader{Magic: diskfmt.PaxosMagic, Version: diskfmt.PaxosVersion}
	assert.False(t, p.NewFormat())
	p.Version = diskfmt.PaxosVersion70
	assert.True(t, p.NewFormat())
	p.Version = 0x00080000
	assert.False(t, p.NewFormat(), "an unknown version is printed as 3.8.5 prints it")
	p.Version, p.Flags = 0x34567890, 0xffffffff
	assert.False(t, p.NewFormat(), "nor an unknown version with every flag")
	assert.False(t, (&diskfmt.Leader{Flags: diskfmt.LeaderCAW}).NewFormat(), "nor an unknown magic")
	assert.True(t, (&diskfmt.Leader{Flags: diskfmt.LeaderCAW}).CAW())
	assert.True(t, (&diskfmt.Leader{Flags: diskfmt.LeaderDeadExt}).DeadExt())
	assert.True(t, (&diskfmt.Leader{Flags: diskfmt.LeaderNoTimeout}).NoTimeout())
}
