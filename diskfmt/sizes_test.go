package diskfmt_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// pairs is the exact table of docs/ondisk.md "Conventions".
var pairs = []struct {
	sector, align, maxHosts int
	leaderFlag, rindexFlag  uint32
	rindexMax, perSector    int
}{
	{512, 1 << 20, 2000, 0x10, 0x1, 16000, 8},
	{4096, 1 << 20, 250, 0x10, 0x1, 16000, 64},
	{4096, 2 << 20, 500, 0x20, 0x2, 32000, 64},
	{4096, 4 << 20, 1000, 0x40, 0x4, 64000, 64},
	{4096, 8 << 20, 2000, 0x80, 0x8, 128000, 64},
}

func TestGeometryTable(t *testing.T) {
	gs := diskfmt.Geometries()
	require.Len(t, gs, len(pairs))
	for i, p := range pairs {
		g := gs[i]
		assert.Equal(t, p.sector, g.SectorSize)
		assert.Equal(t, p.align, g.AlignSize)
		assert.Equal(t, p.maxHosts, g.MaxHosts)
		assert.Equal(t, p.align/p.sector, g.SectorsPerArea())
		// A paxos lease (leader, request, max_hosts dblocks) fits the area.
		assert.LessOrEqual(t, p.maxHosts+2, g.SectorsPerArea())

		lg, ok := diskfmt.LookupGeometry(p.sector, p.align)
		require.True(t, ok)
		assert.Equal(t, g, lg)
		assert.Equal(t, p.leaderFlag, diskfmt.AlignFlag(p.align))
		assert.Equal(t, p.rindexFlag, diskfmt.RindexAlignFlag(p.align))
		assert.Equal(t, p.align, diskfmt.RindexAlignFromFlags(p.rindexFlag))
		assert.Equal(t, p.rindexMax, diskfmt.RindexMaxResources(g))
		assert.GreaterOrEqual(t, diskfmt.MaxRindexEntries(g), p.rindexMax, "the area holds max_resources entries")
		assert.Equal(t, p.perSector, p.sector/diskfmt.RindexEntrySize)

		f := diskfmt.SizeFlags(g)
		assert.Equal(t, p.align, diskfmt.AlignFromFlags(f))
		assert.Equal(t, p.sector, diskfmt.SectorFromFlags(f))
		gf, ok := diskfmt.GeometryFromFlags(f)
		require.True(t, ok)
		assert.Equal(t, g, gf)
	}
	assert.Equal(t, "512/1048576", gs[0].String())

	// Returned slice is a copy.
	gs[0].MaxHosts = 1
	assert.Equal(t, 2000, diskfmt.Geometries()[0].MaxHosts)
}

func TestLookupGeometryInvalid(t *testing.T) {
	for _, c := range [][2]int{
		{512, 2 << 20}, {512, 4 << 20}, {512, 8 << 20}, {1024, 1 << 20}, {4096, 16 << 20}, {0, 0}, {4096, 0}, {8192, 8 << 20},
	} {
		_, ok := diskfmt.LookupGeometry(c[0], c[1])
		assert.False(t, ok, "%v", c)
	}
}

func TestLegacyAlign(t *testing.T) {
	assert.Equal(t, 1<<20, diskfmt.LegacyAlign(512))
	assert.Equal(t, 8<<20, diskfmt.LegacyAlign(4096))
	assert.Equal(t, -1, diskfmt.LegacyAlign(1024))
	assert.Equal(t, -1, diskfmt.LegacyAlign(0))
}

func TestFlagDecodingFirstMatch(t *testing.T) {
	// Several bits set: first match in the order 1M, 2M, 4M, 8M and 512
	// before 4K (docs/ondisk.md "Conventions").
	assert.Equal(t, 1<<20, diskfmt.AlignFromFlags(0xF0))
	assert.Equal(t, 2<<20, diskfmt.AlignFromFlags(0xE0))
	assert.Equal(t, 4<<20, diskfmt.AlignFromFlags(0xC0))
	assert.Equal(t, 8<<20, diskfmt.AlignFromFlags(0x80))
	assert.Equal(t, 0, diskfmt.AlignFromFlags(0x30F))
	assert.Equal(t, 512, diskfmt.SectorFromFlags(0x300))
	assert.Equal(t, 4096, diskfmt.SectorFromFlags(0x200))
	assert.Equal(t, 0, diskfmt.SectorFromFlags(0xFF))
	assert.Equal(t, 1<<20, diskfmt.RindexAlignFromFlags(0xF))
	assert.Equal(t, 8<<20, diskfmt.RindexAlignFromFlags(0x8))
	assert.Equal(t, 0, diskfmt.RindexAlignFromFlags(0x10))
	assert.Equal(t, uint32(0), diskfmt.AlignFlag(3<<20))
	assert.Equal(t, uint32(0), diskfmt.RindexAlignFlag(3<<20))
}

func TestGeometryForWrite(t *testing.T) {
	const (
		a1, a2, a4, a8 = 0x10, 0x20, 0x40, 0x80
		s512, s4k      = 0x100, 0x200
	)
	type want struct {
		sector, align, maxHosts int
	}
	for _, tc := range []struct {
		name   string
		flags  uint32
		device int
		want   *want // nil: error -1
	}{
		{"512/1M", s512 | a1, 512, &want{512, 1 << 20, 2000}},
		{"4096/1M", s4k | a1, 4096, &want{4096, 1 << 20, 250}},
		{"4096/2M", s4k | a2, 512, &want{4096, 2 << 20, 500}},
		{"4096/4M", s4k | a4, 4096, &want{4096, 4 << 20, 1000}},
		{"4096/8M", s4k | a8, 512, &want{4096, 8 << 20, 2000}},
		// Flags win over the device: 512 on a 4K device is chosen here and
		// fails later at I/O time.
		{"512/1M on 4K device", s512 | a1, 4096, &want{512, 1 << 20, 2000}},
		{"no flags 512 device", 0, 512, &want{512, 1 << 20, 2000}},
		{"no flags 4K device", 0, 4096, &want{4096, 8 << 20, 2000}},
		{"no flags odd device", 0, 1024, nil},
		{"only sector 512", s512, 512, nil},
		{"only sector 4K", s4k, 4096, nil},
		{"only align 1M", a1, 512, nil},
		{"only align 8M", a8, 4096, nil},
		{"512/2M", s512 | a2, 512, nil},
		{"512/4M", s512 | a4, 512, nil},
		{"512/8M", s512 | a8, 512, nil},
		{"unrelated bits only", 0x1 | 0x400, 512, &want{512, 1 << 20, 2000}},
		{"multi bits first match", s512 | s4k | a1 | a8, 4096, &want{512, 1 << 20, 2000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := diskfmt.GeometryForWrite(tc.flags, tc.device)
			if tc.want == nil {
				require.Error(t, err)
				assert.Equal(t, rescode.Code(-1), rescode.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, diskfmt.Geometry{SectorSize: tc.want.sector, AlignSize: tc.want.align, MaxHosts: tc.want.maxHosts}, g)
		})
	}
}

func TestGeometryFromLeader(t *testing.T) {
	for _, p := range pairs {
		l := diskfmt.Leader{SectorSize: uint32(p.sector), Flags: p.leaderFlag | diskfmt.LeaderShortHold}
		g, err := diskfmt.GeometryFromLeader(&l)
		require.NoError(t, err)
		assert.Equal(t, diskfmt.Geometry{SectorSize: p.sector, AlignSize: p.align, MaxHosts: p.maxHosts}, g)
	}
	// No align flag: legacy mapping, max_hosts 2000.
	g, err := diskfmt.GeometryFromLeader(&diskfmt.Leader{SectorSize: 512})
	require.NoError(t, err)
	assert.Equal(t, diskfmt.Geometry{SectorSize: 512, AlignSize: 1 << 20, MaxHosts: 2000}, g)
	g, err = diskfmt.GeometryFromLeader(&diskfmt.Leader{SectorSize: 4096})
	require.NoError(t, err)
	assert.Equal(t, diskfmt.Geometry{SectorSize: 4096, AlignSize: 8 << 20, MaxHosts: 2000}, g)

	for _, ss := range []uint32{0, 1024, 2048, 8192, 513} {
		_, err := diskfmt.GeometryFromLeader(&diskfmt.Leader{SectorSize: ss, Flags: 0x10})
		assert.Equal(t, rescode.ErrLeaderSectorSize, rescode.CodeOf(err), "sector %d", ss)
		assert.Equal(t, rescode.Code(-225), rescode.CodeOf(err))
	}
	for _, f := range []uint32{0x20, 0x40, 0x80} {
		_, err := diskfmt.GeometryFromLeader(&diskfmt.Leader{SectorSize: 512, Flags: f})
		assert.Equal(t, rescode.Code(-230), rescode.CodeOf(err), "flags %#x", f)
	}
}
