package diskfmt_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Fuzz targets for every decoder. Each is seeded from the golden images
// written by the real sanlock (testdata/golden/*.img.gz, when present) and
// from encoded structs. Run one with e.g.
//
//	go test -run=X -fuzz=FuzzDecodeLeader -fuzztime=5s ./diskfmt/

const goldenDir = "../testdata/golden"

var (
	goldenOnce   sync.Once
	goldenImages map[string][]byte
)

// loadGoldenImages gunzips every testdata/golden/*.img.gz once per test
// binary. A missing directory gives an empty map.
func loadGoldenImages(tb testing.TB) map[string][]byte {
	tb.Helper()
	goldenOnce.Do(func() {
		goldenImages = map[string][]byte{}
		paths, _ := filepath.Glob(filepath.Join(goldenDir, "*.img.gz"))
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				continue
			}
			zr, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				continue
			}
			b, err := io.ReadAll(zr)
			f.Close()
			if err != nil {
				continue
			}
			goldenImages[filepath.Base(p)] = b
		}
	})
	return goldenImages
}

// goldenChunks returns the distinct non-zero chunks of size n found at
// n-aligned offsets of the golden images (at most limit, deterministic).
func goldenChunks(tb testing.TB, n, limit int) [][]byte {
	imgs := loadGoldenImages(tb)
	names := make([]string, 0, len(imgs))
	for k := range imgs {
		names = append(names, k)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	var out [][]byte
	zero := make([]byte, n)
	for _, name := range names {
		img := imgs[name]
		for off := 0; off+n <= len(img); off += n {
			c := img[off : off+n]
			if bytes.Equal(c, zero) || seen[string(c)] {
				continue
			}
			seen[string(c)] = true
			out = append(out, append([]byte(nil), c...))
			if len(out) >= limit {
				return out
			}
		}
	}
	return out
}

func encodedLeaders() [][]byte {
	var out [][]byte
	for _, l := range []diskfmt.Leader{
		deltaLeader("LS1"), paxosLeader("LS1", "RES1", 2000), distinctLeader(),
		{Magic: diskfmt.PaxosClear, Version: diskfmt.PaxosVersion, SectorSize: 4096, Flags: 0x80},
		func() diskfmt.Leader {
			l := deltaLeader("LS1")
			l.Version, l.Flags, l.Unused1 = diskfmt.DeltaVersion50, l.Flags|diskfmt.LeaderDeadExt|diskfmt.LeaderCAW, diskfmt.DeadExtMark
			return l
		}(),
		func() diskfmt.Leader {
			l := paxosLeader("LS1", "RES1", 2000)
			l.Version, l.Flags = diskfmt.PaxosVersion70, l.Flags|diskfmt.LeaderNoTimeout
			return l
		}(),
	} {
		out = append(out, sealed(l))
	}
	return out
}

func FuzzDecodeLeader(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 200) {
		f.Add(b, "LS2", "RA", uint64(1))
	}
	for _, b := range encodedLeaders() {
		f.Add(b, "LS1", "RES1", uint64(1))
	}
	f.Add([]byte{}, "", "", uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, space, res string, host uint64) {
		l, err := diskfmt.DecodeLeader(raw)
		if len(raw) < diskfmt.LeaderSize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("decode of %d bytes failed: %v", len(raw), err)
		}
		var enc [diskfmt.LeaderSize]byte
		l.Encode(enc[:])
		if !bytes.Equal(enc[:], raw[:diskfmt.LeaderSize]) {
			t.Fatalf("decode/encode not stable at %d", firstDiff(enc[:], raw))
		}
		l2, _ := diskfmt.DecodeLeader(enc[:])
		if l2 != l {
			t.Fatal("decode(encode(x)) != x")
		}

		check := func(what string, v diskfmt.Leader, err error, wantMagic uint32, codes ...rescode.Code) {
			if v != l {
				t.Fatalf("%s returned other fields than DecodeLeader", what)
			}
			if err == nil {
				if v.Magic != wantMagic {
					t.Fatalf("%s accepted magic %#x", what, v.Magic)
				}
				// A verified leader re-encodes, re-sealed, to the same bytes.
				s := v
				var b [diskfmt.LeaderSize]byte
				s.Seal(b[:])
				if !bytes.Equal(b[:], raw[:diskfmt.LeaderSize]) || s.Checksum != v.Checksum {
					t.Fatalf("%s: verified leader does not re-seal to the same bytes", what)
				}
				return
			}
			c := rescode.CodeOf(err)
			for _, w := range codes {
				if c == w {
					return
				}
			}
			t.Fatalf("%s: unexpected code %d", what, c)
		}
		dl, err := diskfmt.VerifyDelta(raw, space)
		check("VerifyDelta", dl, err, diskfmt.DeltaMagic, -223, -224, -226, -229)
		if (err == nil) && !diskfmt.DeltaVersionKnown(l.Version) {
			t.Fatalf("VerifyDelta accepted version %#x", l.Version)
		}
		if l.Magic == diskfmt.DeltaMagic && (rescode.CodeOf(err) == -224) == diskfmt.DeltaVersionKnown(l.Version) {
			t.Fatalf("VerifyDelta: version %#x known %v, result %v", l.Version, diskfmt.DeltaVersionKnown(l.Version), err)
		}
		pl, err := diskfmt.VerifyPaxos(raw, space, res, host)
		check("VerifyPaxos", pl, err, diskfmt.PaxosMagic, -223, -224, -226, -227, -228, -229)
		if err == nil && !diskfmt.PaxosVersionKnown(l.Version) {
			t.Fatalf("VerifyPaxos accepted version %#x", l.Version)
		}
		// The 5.x flag bits and names follow Flags alone.
		if n := len(diskfmt.LeaderFlagNames(l.Flags)); n != bits.OnesCount32(l.Flags&0xff) {
			t.Fatalf("flags %#x: %d names", l.Flags, n)
		}
		if l.Flags&diskfmt.LeaderNewFlags != 0 && !l.NewFormat() &&
			((l.Magic == diskfmt.DeltaMagic && diskfmt.DeltaVersionKnown(l.Version)) ||
				(l.Magic == diskfmt.PaxosMagic && diskfmt.PaxosVersionKnown(l.Version))) {
			t.Fatalf("flags %#x not a new format", l.Flags)
		}
		if err == nil && host != 0 && l.NumHosts < host {
			t.Fatal("VerifyPaxos ignored num_hosts")
		}
	})
}

func FuzzDecodeDblock(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 200) {
		f.Add(b[:128])
	}
	d := diskfmt.Dblock{Mbal: 1, Bal: 1, Inp: 1, Inp2: 1, Inp3: 505, Lver: 1, Flags: 1}
	b := make([]byte, 56)
	d.Seal(b)
	f.Add(b)
	f.Add(make([]byte, 56))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := diskfmt.DecodeDblock(raw)
		if len(raw) < diskfmt.DblockSize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		var enc [diskfmt.DblockSize]byte
		d.Encode(enc[:])
		if !bytes.Equal(enc[:], raw[:diskfmt.DblockSize]) {
			t.Fatal("decode/encode not stable")
		}
		switch {
		case err == nil:
			if !d.IsZero() {
				s := d
				var b [diskfmt.DblockSize]byte
				s.Seal(b[:])
				if !bytes.Equal(b[:], enc[:]) {
					t.Fatal("accepted dblock does not re-seal to the same bytes")
				}
			}
		case rescode.CodeOf(err) == rescode.ErrDblockChecksum:
			if d.IsZero() || diskfmt.Checksum(raw[:48]) == d.Checksum {
				t.Fatal("checksum error on a valid dblock")
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func FuzzDecodeModeBlock(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 200) {
		f.Add(b[diskfmt.ModeBlockOffset : diskfmt.ModeBlockOffset+32])
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := diskfmt.DecodeModeBlock(raw)
		if len(raw) < diskfmt.ModeBlockSize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var enc [diskfmt.ModeBlockSize]byte
		m.Encode(enc[:])
		want := append([]byte(nil), raw[:diskfmt.ModeBlockSize]...)
		clear(want[4:8]) // padding: ignored on read, zero on write
		if !bytes.Equal(enc[:], want) {
			t.Fatal("decode/encode not stable")
		}
		if m2, _ := diskfmt.DecodeModeBlock(enc[:]); m2 != m {
			t.Fatal("decode(encode(x)) != x")
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 200) {
		f.Add(b[:32])
	}
	r := diskfmt.NewRequest()
	r.Lver, r.ForceMode = 2, 2
	b := make([]byte, 24)
	r.Encode(b)
	f.Add(b)
	f.Add(append(b[:20:20], 0xaf, 0x55, 0, 0))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := diskfmt.DecodeRequest(raw)
		if len(raw) < diskfmt.RequestSize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		var enc [diskfmt.RequestSize]byte
		r.Encode(enc[:])
		want := append([]byte(nil), raw[:diskfmt.RequestSize]...)
		clear(want[20:24])
		if !bytes.Equal(enc[:], want) {
			t.Fatal("decode/encode not stable")
		}
		switch c := rescode.CodeOf(err); c {
		case 0:
			if r.Magic != diskfmt.RequestMagic || r.Version>>16 != 1 {
				t.Fatal("accepted a bad request record")
			}
		case rescode.ErrRequestMagic:
			if r.Magic == diskfmt.RequestMagic {
				t.Fatal("magic error on good magic")
			}
		case rescode.ErrRequestVersion:
			if r.Magic != diskfmt.RequestMagic || r.Version>>16 == 1 {
				t.Fatal("version error out of order")
			}
		default:
			t.Fatalf("unexpected code %d", c)
		}
	})
}

func FuzzDecodeRindexHeader(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 200) {
		f.Add(b[:96], "LS2", uint64(4194304))
	}
	h := diskfmt.RindexHeader{
		Magic: diskfmt.RindexMagic, Version: diskfmt.RindexVersion, Flags: 0x8, SectorSize: 4096,
		MaxResources: 4096, RxOffset: 8 << 20, LockspaceName: diskfmt.MustName("R4"),
	}
	b := make([]byte, 80)
	h.Encode(b)
	f.Add(b, "R4", uint64(8<<20))
	f.Fuzz(func(t *testing.T, raw []byte, space string, rx uint64) {
		h, err := diskfmt.DecodeRindexHeader(raw)
		if len(raw) < diskfmt.RindexHeaderSize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		var enc [diskfmt.RindexHeaderSize]byte
		h.Encode(enc[:])
		if !bytes.Equal(enc[:], raw[:diskfmt.RindexHeaderSize]) {
			t.Fatal("decode/encode not stable")
		}
		if g, err := h.Geometry(); err == nil {
			if _, ok := diskfmt.LookupGeometry(g.SectorSize, g.AlignSize); !ok {
				t.Fatal("header geometry not in the table")
			}
		}
		vh, err := diskfmt.VerifyRindexHeader(raw, space, rx)
		if vh != h {
			t.Fatal("verify returned other fields")
		}
		switch c := rescode.CodeOf(err); c {
		case 0:
			if h.Magic != diskfmt.RindexMagic || h.Version>>16 != 1 || h.RxOffset != rx ||
				diskfmt.NameString(h.LockspaceName[:]) != space {
				t.Fatal("accepted a bad header")
			}
		case -274, -275, -276, -277:
		default:
			t.Fatalf("unexpected code %d", c)
		}
	})
}

func FuzzDecodeRindexEntry(f *testing.F) {
	for _, b := range goldenChunks(f, 64, 200) {
		f.Add(b)
	}
	e := diskfmt.RindexEntry{ResOffset: 5 << 20, Name: diskfmt.MustName("RX1")}
	b := make([]byte, 64)
	e.Encode(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := diskfmt.DecodeRindexEntry(raw)
		if len(raw) < diskfmt.RindexEntrySize {
			if rescode.CodeOf(err) != rescode.ErrEIO {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var enc [diskfmt.RindexEntrySize]byte
		e.Encode(enc[:])
		if !bytes.Equal(enc[:], raw[:diskfmt.RindexEntrySize]) {
			t.Fatal("decode/encode not stable")
		}
		if e.IsFree() != (binary.LittleEndian.Uint64(raw) == 0 && raw[16] == 0) {
			t.Fatal("IsFree disagrees with the spec rule")
		}
	})
}

func FuzzGeometryFromLeader(f *testing.F) {
	for _, b := range goldenChunks(f, 512, 100) {
		f.Add(b[:diskfmt.LeaderSize], 512)
	}
	for _, b := range encodedLeaders() {
		f.Add(b[:diskfmt.LeaderSize], 4096)
	}
	f.Fuzz(func(t *testing.T, raw []byte, devSector int) {
		l, err := diskfmt.DecodeLeader(raw)
		if err != nil {
			return
		}
		g, err := diskfmt.GeometryFromLeader(&l)
		switch c := rescode.CodeOf(err); c {
		case 0:
			if l.SectorSize != 512 && l.SectorSize != 4096 {
				t.Fatalf("accepted sector size %d", l.SectorSize)
			}
			if diskfmt.AlignFromFlags(l.Flags) == 0 {
				if g.AlignSize != diskfmt.LegacyAlign(g.SectorSize) || g.MaxHosts != diskfmt.DefaultMaxHosts {
					t.Fatalf("legacy geometry %+v", g)
				}
			} else if tg, ok := diskfmt.LookupGeometry(g.SectorSize, g.AlignSize); !ok || tg != g {
				t.Fatalf("geometry %+v not in the table", g)
			}
			if g.SectorsPerArea() < g.MaxHosts+2 {
				t.Fatalf("geometry %+v cannot hold a paxos lease", g)
			}
		case rescode.ErrLeaderSectorSize:
			if l.SectorSize == 512 || l.SectorSize == 4096 {
				t.Fatal("-225 for a valid sector size")
			}
		case rescode.ErrAddLSSizes:
		default:
			t.Fatalf("unexpected code %d", c)
		}

		// The same bits used as request flags for a writer.
		wg, err := diskfmt.GeometryForWrite(l.Flags, devSector)
		if err == nil {
			if wg.MaxHosts != diskfmt.DefaultMaxHosts {
				if tg, ok := diskfmt.LookupGeometry(wg.SectorSize, wg.AlignSize); !ok || tg != wg {
					t.Fatalf("write geometry %+v", wg)
				}
			}
			if fg, ok := diskfmt.GeometryFromFlags(diskfmt.SizeFlags(wg)); ok && (fg.SectorSize != wg.SectorSize || fg.AlignSize != wg.AlignSize) {
				t.Fatal("SizeFlags does not round-trip")
			}
		} else if rescode.CodeOf(err) != rescode.ErrEPERM {
			t.Fatalf("GeometryForWrite: %v", err)
		}
	})
}
