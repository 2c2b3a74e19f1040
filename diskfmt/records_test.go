package diskfmt_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

func TestDblockOffsetsAndRoundTrip(t *testing.T) {
	d := diskfmt.Dblock{
		Mbal: 0x0102030405060708, Bal: 0x1112131415161718, Inp: 0x2122232425262728, Inp2: 0x3132333435363738,
		Inp3: 0x4142434445464748, Lver: 0x5152535455565758, Checksum: 0x61626364, Flags: 0x71727374,
	}
	b := bytes.Repeat([]byte{0xEE}, 128)
	d.Encode(b)
	assert.Equal(t, d.Mbal, le.Uint64(b[0:]))
	assert.Equal(t, d.Bal, le.Uint64(b[8:]))
	assert.Equal(t, d.Inp, le.Uint64(b[16:]))
	assert.Equal(t, d.Inp2, le.Uint64(b[24:]))
	assert.Equal(t, d.Inp3, le.Uint64(b[32:]))
	assert.Equal(t, d.Lver, le.Uint64(b[40:]))
	assert.Equal(t, d.Checksum, le.Uint32(b[48:]))
	assert.Equal(t, d.Flags, le.Uint32(b[52:]))
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 128-56), b[56:], "Encode wrote past 56")

	// Sealed dblocks decode to themselves.
	d.Seal(b)
	got, err := diskfmt.DecodeDblock(b)
	require.NoError(t, err)
	assert.Equal(t, d, got)
	var b2 [diskfmt.DblockSize]byte
	got.Encode(b2[:])
	assert.Equal(t, b[:56], b2[:])

	_, err = diskfmt.DecodeDblock(b[:55])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func TestDblockRules(t *testing.T) {
	// All-zero: valid, never used.
	z, err := diskfmt.DecodeDblock(make([]byte, 56))
	require.NoError(t, err)
	assert.True(t, z.IsZero())

	// Flags are not covered by the checksum.
	d := diskfmt.Dblock{Mbal: 1, Bal: 1, Inp: 1, Inp2: 1, Inp3: 505, Lver: 1}
	b := make([]byte, 512)
	d.Seal(b)
	sum := d.Checksum
	le.PutUint32(b[52:], diskfmt.DblockReleased)
	got, err := diskfmt.DecodeDblock(b)
	require.NoError(t, err)
	assert.Equal(t, uint32(diskfmt.DblockReleased), got.Flags)
	assert.Equal(t, sum, got.Checksum)
	d2 := d
	d2.Flags = 0xFFFFFFFF
	var b3 [56]byte
	d2.Seal(b3[:])
	assert.Equal(t, sum, d2.Checksum)

	// A flipped bit in [0,48) is a checksum error; the fields still come back.
	for _, off := range []int{0, 8, 16, 24, 32, 40, 47} {
		c := append([]byte(nil), b...)
		c[off] ^= 0x80
		got, err := diskfmt.DecodeDblock(c)
		assert.Equal(t, rescode.Code(-214), rescode.CodeOf(err), "offset %d", off)
		assert.NotZero(t, got.Lver|got.Mbal)
	}
	// A zeroed checksum on a used dblock is an error too.
	c := append([]byte(nil), b...)
	le.PutUint32(c[48:], 0)
	_, err = diskfmt.DecodeDblock(c)
	assert.Equal(t, rescode.ErrDblockChecksum, rescode.CodeOf(err))
	// Only the checksum non-zero: not "never used", so checked.
	c = make([]byte, 56)
	le.PutUint32(c[48:], 1)
	_, err = diskfmt.DecodeDblock(c)
	assert.Equal(t, rescode.ErrDblockChecksum, rescode.CodeOf(err))
	// Only flags non-zero: still the valid empty dblock.
	c = make([]byte, 56)
	le.PutUint32(c[52:], 1)
	_, err = diskfmt.DecodeDblock(c)
	assert.NoError(t, err)

	assert.Equal(t, int64(2), diskfmt.DblockSector(1))
	assert.Equal(t, int64(2001), diskfmt.DblockSector(2000))
}

func TestModeBlock(t *testing.T) {
	m := diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: 0x0102030405060708}
	b := bytes.Repeat([]byte{0xEE}, 32)
	m.Encode(b)
	assert.Equal(t, uint32(1), le.Uint32(b[0:]))
	assert.Equal(t, []byte{0, 0, 0, 0}, b[4:8], "padding written as zero")
	assert.Equal(t, m.Generation, le.Uint64(b[8:]))
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 16), b[16:])

	got, err := diskfmt.DecodeModeBlock(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	// Padding is ignored on read.
	copy(b[4:8], []byte{1, 2, 3, 4})
	got, err = diskfmt.DecodeModeBlock(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	// The verified SH sector: flags 1, generation 1 at +128 of the dblock sector.
	sec := make([]byte, 512)
	copy(sec[diskfmt.ModeBlockOffset:], []byte{1, 0, 0, 0, 0, 0, 0, 0, 1})
	got, err = diskfmt.DecodeModeBlock(sec[128:])
	require.NoError(t, err)
	assert.Equal(t, diskfmt.ModeBlock{Flags: 1, Generation: 1}, got)
	assert.Equal(t, 136, diskfmt.ModeBlockOffset+8)

	_, err = diskfmt.DecodeModeBlock(b[:15])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func TestRequestRecord(t *testing.T) {
	r := diskfmt.Request{Magic: diskfmt.RequestMagic, Version: diskfmt.RequestVersion, Lver: 0x0102030405060708, ForceMode: 2}
	b := bytes.Repeat([]byte{0xEE}, 64)
	r.Encode(b)
	assert.Equal(t, uint32(0x08292011), le.Uint32(b[0:]))
	assert.Equal(t, uint32(0x00010001), le.Uint32(b[4:]))
	assert.Equal(t, r.Lver, le.Uint64(b[8:]))
	assert.Equal(t, uint32(2), le.Uint32(b[16:]))
	assert.Equal(t, []byte{0, 0, 0, 0}, b[20:24], "padding written as zero")
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 40), b[24:])

	got, err := diskfmt.DecodeRequest(b)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// The real binary may leave garbage in the padding (seen: af 55 00 00).
	copy(b[20:24], []byte{0xaf, 0x55, 0, 0})
	got, err = diskfmt.DecodeRequest(b)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	assert.Equal(t, diskfmt.Request{Magic: diskfmt.RequestMagic, Version: diskfmt.RequestVersion}, diskfmt.NewRequest())

	for _, tc := range []struct {
		name           string
		magic, version uint32
		want           rescode.Code
	}{
		{"minor differs", diskfmt.RequestMagic, 0x00010007, 0},
		{"magic", 0x08292012, diskfmt.RequestVersion, -270},
		{"zero", 0, 0, -270},
		{"magic before version", 0, 0x00020001, -270},
		{"major", diskfmt.RequestMagic, 0x00020001, -271},
		{"zero version", diskfmt.RequestMagic, 0, -271},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := diskfmt.Request{Magic: tc.magic, Version: tc.version}
			var cb [24]byte
			c.Encode(cb[:])
			_, err := diskfmt.DecodeRequest(cb[:])
			assert.Equal(t, tc.want, rescode.CodeOf(err))
		})
	}
	_, err = diskfmt.DecodeRequest(b[:23])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func TestBitmap(t *testing.T) {
	sec := make([]byte, 512)
	diskfmt.BitmapSet(sec, 9)
	// host 9 → bitmap byte 1, bit 0, at sector offset 0x101 (docs/ondisk.md
	// "Lockspace (delta leases)").
	assert.Equal(t, byte(0x01), sec[0x101])
	for i, c := range sec {
		if i != 0x101 {
			require.Zero(t, c, "byte %d", i)
		}
	}
	assert.True(t, diskfmt.BitmapTest(sec, 9))
	assert.False(t, diskfmt.BitmapTest(sec, 8))
	assert.False(t, diskfmt.BitmapTest(sec, 10))

	diskfmt.BitmapSet(sec, 1)
	assert.Equal(t, byte(0x01), sec[256])
	diskfmt.BitmapSet(sec, 8)
	assert.Equal(t, byte(0x81), sec[256])
	diskfmt.BitmapSet(sec, 2000)
	assert.Equal(t, byte(0x80), sec[256+1999/8])
	diskfmt.BitmapSet(sec, 2048)
	assert.Equal(t, byte(0x80), sec[511])
	assert.Equal(t, []uint64{1, 8, 9, 2000}, diskfmt.BitmapHosts(sec, 2000))
	assert.Equal(t, []uint64{1, 8, 9}, diskfmt.BitmapHosts(sec, 250))

	// Out-of-range ids are ignored, not panics.
	before := append([]byte(nil), sec...)
	diskfmt.BitmapSet(sec, 0)
	diskfmt.BitmapSet(sec, 2049)
	diskfmt.BitmapSet(sec[:300], 5)
	assert.Equal(t, before, sec)
	assert.False(t, diskfmt.BitmapTest(sec, 0))
	assert.False(t, diskfmt.BitmapTest(sec[:300], 1))

	assert.Equal(t, int64(0), diskfmt.DeltaSectorOffset(1, 512))
	assert.Equal(t, int64(8*4096), diskfmt.DeltaSectorOffset(9, 4096))
}

func TestRindexHeader(t *testing.T) {
	h := diskfmt.RindexHeader{
		Magic: 0x11223344, Version: 0x55667788, Flags: 0x99aabbcc, SectorSize: 0xddeeff01,
		MaxResources: 0x21222324, Unused: 0x31323334, RxOffset: 0x4142434445464748,
		LockspaceName: diskfmt.MustName(strings.Repeat("L", 48)),
	}
	b := bytes.Repeat([]byte{0xEE}, 128)
	h.Encode(b)
	assert.Equal(t, h.Magic, le.Uint32(b[0:]))
	assert.Equal(t, h.Version, le.Uint32(b[4:]))
	assert.Equal(t, h.Flags, le.Uint32(b[8:]))
	assert.Equal(t, h.SectorSize, le.Uint32(b[12:]))
	assert.Equal(t, h.MaxResources, le.Uint32(b[16:]))
	assert.Equal(t, h.Unused, le.Uint32(b[20:]))
	assert.Equal(t, h.RxOffset, le.Uint64(b[24:]))
	assert.Equal(t, h.LockspaceName[:], b[32:80])
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 48), b[80:])
	got, err := diskfmt.DecodeRindexHeader(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	_, err = diskfmt.DecodeRindexHeader(b[:79])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))
}

func TestVerifyRindexHeader(t *testing.T) {
	good := diskfmt.RindexHeader{
		Magic: diskfmt.RindexMagic, Version: diskfmt.RindexVersion, Flags: diskfmt.RindexAlign1M,
		SectorSize: 512, MaxResources: 4096, RxOffset: 3 << 20, LockspaceName: diskfmt.MustName("LS2"),
	}
	enc := func(f func(*diskfmt.RindexHeader)) []byte {
		h := good
		if f != nil {
			f(&h)
		}
		b := make([]byte, 512)
		h.Encode(b)
		return b
	}
	for _, tc := range []struct {
		name  string
		raw   []byte
		space string
		off   uint64
		want  rescode.Code
	}{
		{"good", enc(nil), "LS2", 3 << 20, 0},
		{"minor version", enc(func(h *diskfmt.RindexHeader) { h.Version = 0x00010000 }), "LS2", 3 << 20, 0},
		{"magic", enc(func(h *diskfmt.RindexHeader) { h.Magic = diskfmt.PaxosMagic }), "LS2", 3 << 20, -274},
		{"zero", make([]byte, 512), "LS2", 3 << 20, -274},
		{"magic first", enc(func(h *diskfmt.RindexHeader) { h.Magic = 0; h.Version = 0 }), "X", 0, -274},
		{"version", enc(func(h *diskfmt.RindexHeader) { h.Version = 0x00020002 }), "LS2", 3 << 20, -275},
		{"version before name", enc(func(h *diskfmt.RindexHeader) { h.Version = 0x00020002 }), "X", 0, -275},
		{"name", enc(nil), "LS3", 3 << 20, -276},
		{"name prefix", enc(nil), "LS", 3 << 20, -276},
		{"name before offset", enc(nil), "LS", 0, -276},
		{"offset", enc(nil), "LS2", 4 << 20, -277},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := diskfmt.VerifyRindexHeader(tc.raw, tc.space, tc.off)
			assert.Equal(t, tc.want, rescode.CodeOf(err))
		})
	}

	for _, p := range pairs {
		h := good
		h.SectorSize = uint32(p.sector)
		h.Flags = p.rindexFlag
		g, err := h.Geometry()
		require.NoError(t, err)
		assert.Equal(t, p.maxHosts, g.MaxHosts)
	}
	bad := good
	bad.Flags = diskfmt.RindexAlign2M
	_, err := bad.Geometry()
	assert.Error(t, err)
}

func TestRindexEntry(t *testing.T) {
	e := diskfmt.RindexEntry{ResOffset: 0x0102030405060708, Flags: 0x11121314, Unused: 0x21222324, Name: diskfmt.MustName("RX1")}
	b := bytes.Repeat([]byte{0xEE}, 80)
	e.Encode(b)
	assert.Equal(t, e.ResOffset, le.Uint64(b[0:]))
	assert.Equal(t, e.Flags, le.Uint32(b[8:]))
	assert.Equal(t, e.Unused, le.Uint32(b[12:]))
	assert.Equal(t, e.Name[:], b[16:64])
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 16), b[64:])
	got, err := diskfmt.DecodeRindexEntry(b)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	assert.False(t, got.IsFree())
	_, err = diskfmt.DecodeRindexEntry(b[:63])
	assert.Equal(t, rescode.ErrEIO, rescode.CodeOf(err))

	assert.True(t, (&diskfmt.RindexEntry{}).IsFree())
	assert.True(t, (&diskfmt.RindexEntry{Flags: 3}).IsFree(), "free is offset 0 and empty name")
	assert.False(t, (&diskfmt.RindexEntry{ResOffset: 1}).IsFree())
	assert.False(t, (&diskfmt.RindexEntry{Name: diskfmt.MustName("a")}).IsFree())

	g512, _ := diskfmt.LookupGeometry(512, 1<<20)
	g4k, _ := diskfmt.LookupGeometry(4096, 8<<20)
	assert.Equal(t, int64(512), diskfmt.RindexEntryOffset(g512, 0))
	assert.Equal(t, int64(512+7*64), diskfmt.RindexEntryOffset(g512, 7))
	assert.Equal(t, int64(1024), diskfmt.RindexEntryOffset(g512, 8), "8 entries per 512 sector")
	assert.Equal(t, int64(8192), diskfmt.RindexEntryOffset(g4k, 64), "64 entries per 4K sector")
	// The spec example: rindex at 3M, entries 0 and 1 at 3146240 and 3146304
	// describe the leases at 5M and 6M.
	assert.Equal(t, int64(3146240), 3<<20+diskfmt.RindexEntryOffset(g512, 0))
	assert.Equal(t, int64(3146304), 3<<20+diskfmt.RindexEntryOffset(g512, 1))
	assert.Equal(t, uint64(5<<20), diskfmt.RindexResourceOffset(g512, 3<<20, 0))
	assert.Equal(t, uint64(6<<20), diskfmt.RindexResourceOffset(g512, 3<<20, 1))
	assert.Equal(t, uint64(25165824), diskfmt.RindexResourceOffset(g4k, 8<<20, 0))
}
