package diskfmt_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
)

// write is one WriteAt seen by a recorder.
type write struct {
	off  int64
	data []byte
}

// recorder wraps a Device and keeps a copy of every write, in order.
type recorder struct {
	diskfmt.Device
	mu     sync.Mutex
	writes []write
	reads  int
}

func (r *recorder) WriteAt(ctx context.Context, p []byte, off int64) error {
	r.mu.Lock()
	r.writes = append(r.writes, write{off, append([]byte(nil), p...)})
	r.mu.Unlock()
	return r.Device.WriteAt(ctx, p, off)
}

func (r *recorder) ReadAt(ctx context.Context, p []byte, off int64) error {
	r.mu.Lock()
	r.reads++
	r.mu.Unlock()
	return r.Device.ReadAt(ctx, p, off)
}

const fill = 0xFF

// margin is the prefilled space kept before and after a written area.
const margin = 64 << 10

// newFilled returns a Mem of size bytes prefilled with 0xFF, so bytes that
// are never written stay visible.
func newFilled(size int64, sector int) (*testdisk.Mem, *recorder) {
	m := testdisk.NewMem(size, sector)
	m.Load(fillPattern[:size], 0)
	return m, &recorder{Device: m}
}

func geometry(t *testing.T, sector, align int) diskfmt.Geometry {
	g, ok := diskfmt.LookupGeometry(sector, align)
	require.True(t, ok)
	return g
}

// firstDiff reports the first differing offset of two byte slices, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func requireBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	if i := firstDiff(want, got); i >= 0 {
		w, g := "EOF", "EOF"
		if i < len(want) {
			w = fmt.Sprintf("%#02x", want[i])
		}
		if i < len(got) {
			g = fmt.Sprintf("%#02x", got[i])
		}
		require.Failf(t, "bytes differ", "%s: first difference at offset %d: want %s, got %s", what, i, w, g)
	}
}

var fillPattern = bytes.Repeat([]byte{fill}, 32<<20)

func requireFill(t *testing.T, b []byte, what string) {
	t.Helper()
	if len(b) <= len(fillPattern) && bytes.Equal(b, fillPattern[:len(b)]) {
		return
	}
	for i, c := range b {
		if c != fill {
			require.Failf(t, "written outside the area", "%s: byte %d is %#02x", what, i, c)
		}
	}
}

// expectedDelta builds the lockspace area from docs/ondisk.md "What init writes" directly.
func expectedDelta(g diskfmt.Geometry, space string, ioTimeout uint16) []byte {
	area := make([]byte, g.AlignSize)
	for i := range g.MaxHosts {
		l := diskfmt.Leader{
			Magic: diskfmt.DeltaMagic, Version: 0x00030004, Flags: diskfmt.AlignFlag(g.AlignSize),
			SectorSize: uint32(g.SectorSize), NumHosts: 0, MaxHosts: 1, SpaceName: diskfmt.MustName(space),
			IOTimeout: ioTimeout,
		}
		l.Seal(area[i*g.SectorSize:])
	}
	return area
}

// expectedPaxos builds a resource area from docs/ondisk.md "What init writes" directly.
func expectedPaxos(g diskfmt.Geometry, space, res string, numHosts uint64, clear bool, ts uint64) []byte {
	area := make([]byte, g.AlignSize)
	l := diskfmt.Leader{
		Magic: diskfmt.PaxosMagic, Version: 0x00060004, Flags: diskfmt.AlignFlag(g.AlignSize),
		SectorSize: uint32(g.SectorSize), NumHosts: numHosts, MaxHosts: uint64(g.MaxHosts),
		SpaceName: diskfmt.MustName(space), ResourceName: diskfmt.MustName(res),
	}
	if clear {
		l.Magic = diskfmt.PaxosClear
		l.WriteTimestamp = ts
	}
	l.Seal(area)
	le.PutUint32(area[g.SectorSize:], 0x08292011)
	le.PutUint32(area[g.SectorSize+4:], 0x00010001)
	return area
}

func devSectors() []int { return []int{512, 4096} }

func TestWriteLockspaceLayout(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		for _, g := range diskfmt.Geometries() {
			if g.SectorSize < dev {
				continue // covered by TestWriteLockspace512On4K
			}
			t.Run(fmt.Sprintf("dev%d/%s", dev, g), func(t *testing.T) {
				// An offset that is not a multiple of the align size is fine.
				off, end := int64(margin), int64(margin+g.AlignSize)
				m, rec := newFilled(end+margin, dev)
				require.NoError(t, diskfmt.WriteLockspace(ctx, rec, off, diskfmt.SizeFlags(g), "LS1", 10, 0))

				img := m.Bytes()
				requireFill(t, img[:off], "before the area")
				requireBytes(t, expectedDelta(g, "LS1", 10), img[off:end], "area")
				requireFill(t, img[end:], "after the area")

				// Two writes: the whole area with sector 0's magic 0, then the
				// one-sector commit.
				require.Len(t, rec.writes, 2)
				w0, w1 := rec.writes[0], rec.writes[1]
				assert.Equal(t, off, w0.off)
				assert.Len(t, w0.data, g.AlignSize)
				l0, _ := diskfmt.DecodeLeader(w0.data)
				assert.Equal(t, uint32(0), l0.Magic, "sector 0 magic is committed last")
				assert.Equal(t, l0.ComputeChecksum(), l0.Checksum, "pass-1 checksum computed with magic 0")
				assert.Equal(t, off, w1.off)
				assert.Len(t, w1.data, g.SectorSize)
				l1, _ := diskfmt.DecodeLeader(w1.data)
				assert.Equal(t, diskfmt.DeltaMagic, l1.Magic)

				// Every delta lease verifies; the area after max_hosts is zero.
				for h := 1; h <= g.MaxHosts; h++ {
					l, raw, err := diskfmt.ReadDeltaLeader(ctx, m, off, g, "LS1", uint64(h))
					require.NoError(t, err, "host %d", h)
					assert.Len(t, raw, g.SectorSize)
					if h == 1 {
						assert.Equal(t, uint64(1), l.MaxHosts)
						assert.Equal(t, uint16(10), l.IOTimeout)
					}
				}
				gg, err := diskfmt.LockspaceGeometry(ctx, m, off)
				require.NoError(t, err)
				assert.Equal(t, g, gg)
			})
		}
	}
}

func TestWriteLockspaceDefaults(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		t.Run(fmt.Sprint(dev), func(t *testing.T) {
			// No flags: device sector, legacy align, max_hosts 2000.
			g := diskfmt.Geometry{SectorSize: dev, AlignSize: diskfmt.LegacyAlign(dev), MaxHosts: 2000}
			m, rec := newFilled(int64(g.AlignSize)+4096, dev)
			require.NoError(t, diskfmt.WriteLockspace(ctx, rec, 0, 0, "DEF", 20, 0))
			img := m.Bytes()
			requireBytes(t, expectedDelta(g, "DEF", 20), img[:g.AlignSize], "area")
			requireFill(t, img[g.AlignSize:], "after")
		})
	}
}

// TestWriteLockspace512On4K: the area write succeeds, the 512-byte commit
// fails with EINVAL, and sector 0 is left with magic 0 (docs/ondisk.md "Sizes at init").
func TestWriteLockspace512On4K(t *testing.T) {
	ctx := context.Background()
	m, rec := newFilled(2*diskfmt.Align1M, 4096)
	err := diskfmt.WriteLockspace(ctx, rec, 0, diskfmt.FlagSector512|diskfmt.FlagAlign1M, "LS", 10, 0)
	require.Error(t, err)
	assert.Equal(t, rescode.Code(-22), rescode.CodeOf(err))
	require.Len(t, rec.writes, 2)
	img := m.Bytes()
	assert.Equal(t, uint32(0), le.Uint32(img[0:]), "sector 0 magic")
	assert.Equal(t, diskfmt.DeltaMagic, le.Uint32(img[512:]), "sector 1 magic")
	requireFill(t, img[diskfmt.Align1M:], "after")
	_, err = diskfmt.LockspaceGeometry(ctx, m, 0)
	assert.Equal(t, rescode.ErrLeaderMagic, rescode.CodeOf(err))
}

func TestWriteLockspaceErrors(t *testing.T) {
	ctx := context.Background()
	m, rec := newFilled(diskfmt.Align1M, 512)
	for _, f := range []uint32{diskfmt.FlagSector512, diskfmt.FlagAlign1M, diskfmt.FlagSector512 | diskfmt.FlagAlign2M} {
		err := diskfmt.WriteLockspace(ctx, rec, 0, f, "LS", 10, 0)
		assert.Equal(t, rescode.Code(-1), rescode.CodeOf(err), "flags %#x", f)
	}
	err := diskfmt.WriteLockspace(ctx, rec, 0, 0, string(bytes.Repeat([]byte("n"), 49)), 10, 0)
	assert.Error(t, err)
	assert.Empty(t, rec.writes, "nothing written on error")
	requireFill(t, m.Bytes(), "device")

	// Too small a device: the area write fails, nothing is half-written.
	small, rec2 := newFilled(diskfmt.Align1M/2, 512)
	err = diskfmt.WriteLockspace(ctx, rec2, 0, 0, "LS", 10, 0)
	assert.Error(t, err)
	requireFill(t, small.Bytes(), "small device")
}

func TestWriteResourceLayout(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		for _, g := range diskfmt.Geometries() {
			for _, v := range []struct {
				name     string
				num      uint64
				wantNum  uint64
				clear    bool
				clearTS  uint64
				resource string
			}{
				{"default", 0, uint64(g.MaxHosts), false, 0, "RES1"},
				{"n10", 10, 10, false, 0, "RES1"},
				{"n5000", 5000, uint64(g.MaxHosts), false, 0, "RES1"},
				{"clear", 0, uint64(g.MaxHosts), true, 1234, "RES1"},
				{"name48", 7, 7, false, 0, string(bytes.Repeat([]byte("r"), 48))},
			} {
				t.Run(fmt.Sprintf("dev%d/%s/%s", dev, g, v.name), func(t *testing.T) {
					off, end := int64(margin), int64(margin+g.AlignSize)
					m, rec := newFilled(end+margin, dev)
					p := diskfmt.PaxosInit{SpaceName: "LS1", ResourceName: v.resource, NumHosts: v.num, Clear: v.clear, ClearTime: v.clearTS}
					err := diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: rec, Offset: off}}, diskfmt.SizeFlags(g), p)
					require.NoError(t, err, "a whole-area paxos init succeeds even with 512 sectors on a 4K device")
					require.Len(t, rec.writes, 1)
					img := m.Bytes()
					requireFill(t, img[:off], "before")
					requireBytes(t, expectedPaxos(g, "LS1", v.resource, v.wantNum, v.clear, v.clearTS), img[off:end], "area")
					requireFill(t, img[end:], "after")

					raw := img[off : off+int64(g.SectorSize)]
					_, err = diskfmt.VerifyPaxos(raw, "LS1", v.resource, v.wantNum)
					if v.clear {
						assert.Equal(t, rescode.ErrLeaderMagic, rescode.CodeOf(err))
					} else {
						assert.NoError(t, err)
					}
					_, err = diskfmt.DecodeRequest(img[off+int64(g.SectorSize):])
					assert.NoError(t, err)
				})
			}
		}
	}
}

func TestWriteResourceMultiDisk(t *testing.T) {
	ctx := context.Background()
	g := geometry(t, 4096, diskfmt.Align1M)
	var disks []diskfmt.ResourceDisk
	var mems []*testdisk.Mem
	for i := range diskfmt.MaxDisks {
		m, _ := newFilled(4*diskfmt.Align1M, 4096)
		mems = append(mems, m)
		disks = append(disks, diskfmt.ResourceDisk{Dev: m, Offset: int64(i) * diskfmt.Align1M})
	}
	require.NoError(t, diskfmt.WriteResource(ctx, disks, diskfmt.SizeFlags(g), diskfmt.PaxosInit{SpaceName: "S", ResourceName: "R"}))
	want := expectedPaxos(g, "S", "R", 250, false, 0)
	for i, m := range mems {
		off := int64(i) * diskfmt.Align1M
		requireBytes(t, want, m.Bytes()[off:off+diskfmt.Align1M], fmt.Sprintf("disk %d", i))
	}

	err := diskfmt.WriteResource(ctx, append(disks, disks[0]), 0, diskfmt.PaxosInit{SpaceName: "S", ResourceName: "R"})
	assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err), "more than 4 disks")
	err = diskfmt.WriteResource(ctx, nil, 0, diskfmt.PaxosInit{SpaceName: "S", ResourceName: "R"})
	assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err), "no disks")
	err = diskfmt.WriteResource(ctx, disks[:1], diskfmt.FlagSector4K, diskfmt.PaxosInit{SpaceName: "S", ResourceName: "R"})
	assert.Equal(t, rescode.Code(-1), rescode.CodeOf(err), "half flags")
}

func TestWriteResourceDefaults(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		g := diskfmt.Geometry{SectorSize: dev, AlignSize: diskfmt.LegacyAlign(dev), MaxHosts: 2000}
		m, _ := newFilled(int64(g.AlignSize)+8192, dev)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m}}, 0, diskfmt.PaxosInit{SpaceName: "LS", ResourceName: "R"}))
		img := m.Bytes()
		requireBytes(t, expectedPaxos(g, "LS", "R", 2000, false, 0), img[:g.AlignSize], fmt.Sprint("dev ", dev))
		requireFill(t, img[g.AlignSize:], "after")
	}
}

// expectedRindex builds a freshly formatted rindex area (docs/ondisk.md
// "Resource index operations").
func expectedRindex(g diskfmt.Geometry, space string, rx uint64, maxRes uint32) []byte {
	area := make([]byte, g.AlignSize)
	le.PutUint32(area[0:], 0x01042018)
	le.PutUint32(area[4:], 0x00010002)
	le.PutUint32(area[8:], diskfmt.RindexAlignFlag(g.AlignSize))
	le.PutUint32(area[12:], uint32(g.SectorSize))
	le.PutUint32(area[16:], maxRes)
	le.PutUint64(area[24:], rx)
	copy(area[32:80], space)
	return area
}

func TestFormatRindexLayout(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		for _, g := range diskfmt.Geometries() {
			if g.SectorSize < dev {
				continue
			}
			t.Run(fmt.Sprintf("dev%d/%s", dev, g), func(t *testing.T) {
				a := int64(g.AlignSize)
				m, rec := newFilled(3*a+margin, dev)
				require.NoError(t, diskfmt.FormatRindex(ctx, rec, a, diskfmt.SizeFlags(g), "LS2", 0))
				img := m.Bytes()
				requireFill(t, img[:a], "before")
				requireBytes(t, expectedRindex(g, "LS2", uint64(a), 4096), img[a:2*a], "rindex")
				requireBytes(t, expectedPaxos(g, "LS2", "rindex_lease", uint64(g.MaxHosts), false, 0), img[2*a:3*a], "rindex_lease")
				requireFill(t, img[3*a:], "after")
				require.Len(t, rec.writes, 2)
				assert.Equal(t, a, rec.writes[0].off)
				assert.Equal(t, 2*a, rec.writes[1].off)
			})
		}
	}
}

func TestFormatRindexMaxResources(t *testing.T) {
	ctx := context.Background()
	g := geometry(t, 512, diskfmt.Align1M)
	for _, tc := range []struct{ in, want uint32 }{{0, 4096}, {10, 10}, {16000, 16000}, {16001, 16000}, {1 << 31, 16000}} {
		m := testdisk.NewMem(2*diskfmt.Align1M, 512)
		require.NoError(t, diskfmt.FormatRindex(ctx, m, 0, diskfmt.SizeFlags(g), "LS", tc.in))
		h, err := diskfmt.VerifyRindexHeader(m.Bytes(), "LS", 0)
		require.NoError(t, err)
		assert.Equal(t, tc.want, h.MaxResources, "in %d", tc.in)
	}
	// No flags on a 4K device: 4096/8M.
	m := testdisk.NewMem(2*diskfmt.Align8M, 4096)
	require.NoError(t, diskfmt.FormatRindex(ctx, m, 0, 0, "LS", 0))
	h, err := diskfmt.VerifyRindexHeader(m.Bytes(), "LS", 0)
	require.NoError(t, err)
	assert.Equal(t, uint32(4096), h.SectorSize)
	assert.Equal(t, diskfmt.RindexAlign8M, h.Flags)

	// Half flags and long names write nothing.
	m2, rec := newFilled(2*diskfmt.Align1M, 512)
	assert.Equal(t, rescode.Code(-1), rescode.CodeOf(diskfmt.FormatRindex(ctx, rec, 0, diskfmt.FlagAlign1M, "LS", 0)))
	assert.Error(t, diskfmt.FormatRindex(ctx, rec, 0, 0, string(bytes.Repeat([]byte("x"), 49)), 0))
	assert.Empty(t, rec.writes)
	requireFill(t, m2.Bytes(), "device")
}

func TestFormatRindex512On4K(t *testing.T) {
	// The rindex area write is a whole align area, so it succeeds on a 4K
	// device, and so does the lease init (docs/ondisk.md "Sizes at init" for init -r).
	m := testdisk.NewMem(2*diskfmt.Align1M, 4096)
	err := diskfmt.FormatRindex(context.Background(), m, 0, diskfmt.FlagSector512|diskfmt.FlagAlign1M, "LS", 0)
	assert.NoError(t, err)
}

// newRindex formats an rindex at rx on a fresh Mem with room for n leases.
func newRindex(t *testing.T, g diskfmt.Geometry, dev int, rx int64, n int) (*testdisk.Mem, *recorder, *diskfmt.Rindex) {
	t.Helper()
	ctx := context.Background()
	m := testdisk.NewMem(rx+int64(2+n)*int64(g.AlignSize), dev)
	require.NoError(t, diskfmt.FormatRindex(ctx, m, rx, diskfmt.SizeFlags(g), "LS", 0))
	rec := &recorder{Device: m}
	r, err := diskfmt.OpenRindex(ctx, rec, rx, "LS", 0)
	require.NoError(t, err)
	return m, rec, r
}

func TestRindexLookupAndUpdate(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		for _, g := range diskfmt.Geometries() {
			if g.SectorSize < dev {
				continue
			}
			t.Run(fmt.Sprintf("dev%d/%s", dev, g), func(t *testing.T) {
				a := uint64(g.AlignSize)
				rx := uint64(g.AlignSize)
				m, rec, r := newRindex(t, g, dev, int64(rx), 3)
				assert.Equal(t, g, r.Geo)
				base := rx + 2*a

				e, err := r.Lookup(ctx, "", 0)
				require.NoError(t, err)
				assert.Equal(t, base, e.ResOffset, "first free")

				rec.writes = nil
				require.NoError(t, r.UpdateEntry(ctx, "RX1", base, false))
				require.Len(t, rec.writes, 1, "one sector rewritten")
				assert.Equal(t, int64(rx)+int64(g.SectorSize), rec.writes[0].off)
				assert.Len(t, rec.writes[0].data, g.SectorSize)
				require.NoError(t, r.UpdateEntry(ctx, "RX2", base+a, false))

				img := m.Bytes()
				e0, _ := diskfmt.DecodeRindexEntry(img[rx+uint64(g.SectorSize):])
				assert.Equal(t, diskfmt.RindexEntry{ResOffset: base, Name: diskfmt.MustName("RX1")}, e0)
				e1, _ := diskfmt.DecodeRindexEntry(img[rx+uint64(g.SectorSize)+64:])
				assert.Equal(t, diskfmt.RindexEntry{ResOffset: base + a, Name: diskfmt.MustName("RX2")}, e1)

				e, err = r.Lookup(ctx, "", 0)
				require.NoError(t, err)
				assert.Equal(t, base+2*a, e.ResOffset)
				e, err = r.Lookup(ctx, "RX2", 0)
				require.NoError(t, err)
				assert.Equal(t, base+a, e.ResOffset)
				e, err = r.Lookup(ctx, "", base)
				require.NoError(t, err)
				assert.Equal(t, "RX1", diskfmt.NameString(e.Name[:]))
				_, err = r.Lookup(ctx, "RX1", base)
				assert.NoError(t, err)
				_, err = r.Lookup(ctx, "RX2", base)
				assert.Equal(t, rescode.Code(-278), rescode.CodeOf(err))
				_, err = r.Lookup(ctx, "NOPE", 0)
				assert.Equal(t, rescode.Code(-2), rescode.CodeOf(err))
				_, err = r.Lookup(ctx, "", base+1)
				assert.Equal(t, rescode.Code(-277), rescode.CodeOf(err), "not a multiple of align")
				// Aligned offsets outside the entry range read as free slots
				// (verified with the real binary: lookup -e :<rindex_lease
				// offset> prints "name - offset N", done 0).
				e, err = r.Lookup(ctx, "", rx+a)
				assert.NoError(t, err, "below the first lease")
				assert.Equal(t, "", diskfmt.NameString(e.Name[:]))
				assert.Equal(t, rx+a, e.ResOffset)
				_, err = r.Lookup(ctx, "RX1", rx+a)
				assert.Equal(t, rescode.Code(-278), rescode.CodeOf(err), "name given, slot outside the range")

				assert.Equal(t, rescode.Code(-277), rescode.CodeOf(r.UpdateEntry(ctx, "X", base+a/2, false)))
				assert.Equal(t, rescode.Code(-22), rescode.CodeOf(r.UpdateEntry(ctx, "", base, false)))
				assert.Equal(t, rescode.Code(-22), rescode.CodeOf(r.UpdateEntry(ctx, "X", 0, true)))

				// Remove frees the slot; it becomes the first free again.
				require.NoError(t, r.UpdateEntry(ctx, "", base, true))
				e, err = r.Lookup(ctx, "", 0)
				require.NoError(t, err)
				assert.Equal(t, base, e.ResOffset)
				_, err = r.Lookup(ctx, "RX1", 0)
				assert.Equal(t, rescode.ErrENOENT, rescode.CodeOf(err))
				img = m.Bytes()
				assert.Equal(t, make([]byte, 64), img[rx+uint64(g.SectorSize):rx+uint64(g.SectorSize)+64])
				// The header is untouched by entry updates.
				requireBytes(t, expectedRindex(g, "LS", rx, 4096)[:g.SectorSize], img[rx:rx+uint64(g.SectorSize)], "header sector")
			})
		}
	}
}

func TestRindexEntriesAcrossSectors(t *testing.T) {
	ctx := context.Background()
	g := geometry(t, 512, diskfmt.Align1M)
	m := testdisk.NewMem(2*diskfmt.Align1M, 512)
	require.NoError(t, diskfmt.FormatRindex(ctx, m, 0, diskfmt.SizeFlags(g), "LS", 0))
	r, err := diskfmt.OpenRindex(ctx, m, 0, "LS", 512)
	require.NoError(t, err)
	// Entry 8 is the first of the second entry sector.
	off := diskfmt.RindexResourceOffset(g, 0, 8)
	require.NoError(t, r.UpdateEntry(ctx, "E8", off, false))
	img := m.Bytes()
	e, _ := diskfmt.DecodeRindexEntry(img[1024:])
	assert.Equal(t, off, e.ResOffset)
	es, err := r.Entries(ctx)
	require.NoError(t, err)
	assert.Len(t, es, 4096)
	assert.Equal(t, "E8", diskfmt.NameString(es[8].Name[:]))
	got, err := r.Lookup(ctx, "E8", 0)
	require.NoError(t, err)
	assert.Equal(t, off, got.ResOffset)
	// Past max_resources: a free slot, as the real binary prints it.
	past := diskfmt.RindexResourceOffset(g, 0, 16376)
	got, err = r.Lookup(ctx, "", past)
	require.NoError(t, err, "past max_resources")
	assert.Equal(t, past, got.ResOffset)
	assert.True(t, got.Name[0] == 0)
	_, err = r.Lookup(ctx, "", past+1)
	assert.Equal(t, rescode.ErrRindexOffset, rescode.CodeOf(err), "not a multiple of align")
}

func TestOpenRindexErrors(t *testing.T) {
	ctx := context.Background()
	g := geometry(t, 512, diskfmt.Align1M)
	m := testdisk.NewMem(4*diskfmt.Align1M, 512)
	require.NoError(t, diskfmt.FormatRindex(ctx, m, diskfmt.Align1M, diskfmt.SizeFlags(g), "LS", 0))
	_, err := diskfmt.OpenRindex(ctx, m, diskfmt.Align1M, "LSX", 0)
	assert.Equal(t, rescode.Code(-276), rescode.CodeOf(err))
	_, err = diskfmt.OpenRindex(ctx, m, 0, "LS", 0)
	assert.Equal(t, rescode.Code(-274), rescode.CodeOf(err))
	// A header copied elsewhere keeps its rx_offset: -277.
	img := m.Bytes()
	m.Load(img[diskfmt.Align1M:diskfmt.Align1M+512], 3*diskfmt.Align1M)
	_, err = diskfmt.OpenRindex(ctx, m, 3*diskfmt.Align1M, "LS", 0)
	assert.Equal(t, rescode.Code(-277), rescode.CodeOf(err))
	// Version major 2.
	bad := append([]byte(nil), img[diskfmt.Align1M:diskfmt.Align1M+512]...)
	le.PutUint32(bad[4:], 0x00020002)
	m.Load(bad, diskfmt.Align1M)
	_, err = diskfmt.OpenRindex(ctx, m, diskfmt.Align1M, "LS", 0)
	assert.Equal(t, rescode.Code(-275), rescode.CodeOf(err))
}

func TestRindexRebuild(t *testing.T) {
	ctx := context.Background()
	for _, dev := range devSectors() {
		for _, g := range []diskfmt.Geometry{geometry(t, 512, diskfmt.Align1M), geometry(t, 4096, diskfmt.Align2M)} {
			if g.SectorSize < dev {
				continue
			}
			t.Run(fmt.Sprintf("dev%d/%s", dev, g), func(t *testing.T) {
				a := uint64(g.AlignSize)
				rx := uint64(0)
				m, rec, r := newRindex(t, g, dev, int64(rx), 4)
				// Stale entries, to be wiped.
				require.NoError(t, r.UpdateEntry(ctx, "STALE", rx+2*a+a, false))
				init := func(i int, name string, clear bool) {
					p := diskfmt.PaxosInit{SpaceName: "LS", ResourceName: name, Clear: clear, ClearTime: 9}
					off := int64(diskfmt.RindexResourceOffset(g, rx, i))
					require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: off}}, diskfmt.SizeFlags(g), p))
				}
				init(0, "A", false)
				init(1, "B", true) // cleared: not counted
				init(3, "D", false)
				// Bytes after the header in the header sector are kept as read
				// (only the entry sectors are zeroed).
				img := m.Bytes()
				hdr := append([]byte(nil), img[:g.SectorSize]...)
				hdr[100] = 0x5a
				m.Load(hdr, 0)

				rec.writes = nil
				require.NoError(t, r.Rebuild(ctx), "the scan stops at the end of the device")
				require.Len(t, rec.writes, 1)
				assert.Equal(t, int64(rx), rec.writes[0].off)
				assert.Len(t, rec.writes[0].data, g.AlignSize)

				img = m.Bytes()
				want := expectedRindex(g, "LS", rx, 4096)
				want[100] = 0x5a
				for _, e := range []struct {
					i    int
					name string
				}{{0, "A"}, {3, "D"}} {
					re := diskfmt.RindexEntry{ResOffset: diskfmt.RindexResourceOffset(g, rx, e.i), Name: diskfmt.MustName(e.name)}
					re.Encode(want[diskfmt.RindexEntryOffset(g, e.i):])
				}
				requireBytes(t, want, img[:g.AlignSize], "rebuilt rindex")
			})
		}
	}
}

func TestProbeAndDetect(t *testing.T) {
	ctx := context.Background()
	m := testdisk.NewMem(8*diskfmt.Align1M, 512)
	g := geometry(t, 512, diskfmt.Align1M)
	require.NoError(t, diskfmt.WriteLockspace(ctx, m, 0, diskfmt.SizeFlags(g), "LS", 10, 0))
	require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: diskfmt.Align1M}}, diskfmt.SizeFlags(g), diskfmt.PaxosInit{SpaceName: "LS", ResourceName: "R"}))
	require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: 2 * diskfmt.Align1M}}, diskfmt.SizeFlags(g), diskfmt.PaxosInit{SpaceName: "LS", ResourceName: "C", Clear: true}))
	require.NoError(t, diskfmt.FormatRindex(ctx, m, 3*diskfmt.Align1M, diskfmt.SizeFlags(g), "LS", 0))

	for _, tc := range []struct {
		off  int64
		want rescode.Code
	}{
		{0, 0}, {diskfmt.Align1M, 0}, {2 * diskfmt.Align1M, -1}, {3 * diskfmt.Align1M, -1}, {4 * diskfmt.Align1M, 0},
		{6 * diskfmt.Align1M, -1}, {8*diskfmt.Align1M - 512, -1},
	} {
		gg, err := diskfmt.DetectLeaderGeometry(ctx, m, tc.off)
		assert.Equal(t, tc.want, rescode.CodeOf(err), "offset %d", tc.off)
		if err == nil {
			assert.Equal(t, g, gg)
		}
	}

	_, err := diskfmt.LockspaceGeometry(ctx, m, diskfmt.Align1M)
	assert.Equal(t, rescode.ErrLeaderMagic, rescode.CodeOf(err), "paxos is not a lockspace")

	l, raw, err := diskfmt.ReadPaxosLeader(ctx, m, diskfmt.Align1M, 512, "LS", "R", 2000)
	require.NoError(t, err)
	assert.Equal(t, "R", diskfmt.NameString(l.ResourceName[:]))
	assert.Len(t, raw, 512)
	_, _, err = diskfmt.ReadPaxosLeader(ctx, m, 2*diskfmt.Align1M, 512, "LS", "C", 1)
	assert.Equal(t, rescode.ErrLeaderMagic, rescode.CodeOf(err))
	_, _, err = diskfmt.ReadPaxosLeader(ctx, m, diskfmt.Align1M, 512, "LS", "R", 2001)
	assert.Equal(t, rescode.ErrLeaderNumHosts, rescode.CodeOf(err))

	_, _, err = diskfmt.ReadDeltaLeader(ctx, m, 0, g, "LS", 0)
	assert.Equal(t, rescode.Code(-22), rescode.CodeOf(err), "host_id 0")
	_, _, err = diskfmt.ReadDeltaLeader(ctx, m, 0, g, "LSX", 3)
	assert.Equal(t, rescode.ErrLeaderLockspace, rescode.CodeOf(err))
	_, _, err = diskfmt.ReadDeltaLeader(ctx, m, 0, g, "LS", 2001)
	assert.Equal(t, rescode.ErrLeaderMagic, rescode.CodeOf(err), "past max_hosts the sectors are zero")

	// Crafted lockspace leaders for the add_lockspace size checks.
	craft := func(f func(*diskfmt.Leader)) rescode.Code {
		l := deltaLeader("LS")
		f(&l)
		b := make([]byte, 4096)
		l.Seal(b)
		mm := testdisk.NewMem(diskfmt.Align1M, 512)
		mm.Load(b, 0)
		_, err := diskfmt.LockspaceGeometry(ctx, mm, 0)
		return rescode.CodeOf(err)
	}
	assert.Equal(t, rescode.Code(0), craft(func(*diskfmt.Leader) {}))
	assert.Equal(t, rescode.Code(0), craft(func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion40 }))
	assert.Equal(t, rescode.Code(0), craft(func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion50 }))
	assert.Equal(t, rescode.Code(-224), craft(func(l *diskfmt.Leader) { l.Version = 0x00060000 }))
	assert.Equal(t, rescode.Code(-225), craft(func(l *diskfmt.Leader) { l.SectorSize = 1024 }))
	assert.Equal(t, rescode.Code(-230), craft(func(l *diskfmt.Leader) { l.Flags = 0x80 }))

	// Reads past the end of the device are short reads.
	_, err = diskfmt.ProbeLeader(ctx, m, 8*diskfmt.Align1M)
	assert.True(t, diskfmt.IsShortRead(err))
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}
