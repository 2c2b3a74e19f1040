package main

// Side-by-side interoperability tests: our sanlock binary against the real
// sanlock 3.8.5 (/usr/sbin/sanlock). They need root (O_DIRECT files under
// /var/tmp, loop devices, a real daemon) and the real binary; without either
// they skip. Every temporary file lives under /var/tmp (tmpfs has no
// O_DIRECT), every loop device is detached and every process is killed by
// pid in t.Cleanup.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/testdisk"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

const realSanlock = "/usr/sbin/sanlock"

var (
	buildOnce sync.Once
	buildDir  string
	ourPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// interop skips unless the real binary is installed and we are root, and
// returns the path of our freshly built binary (built once per test binary).
func interop(t testing.TB) string {
	t.Helper()
	testenv.NeedBinary(t, realSanlock)
	testenv.NeedRoot(t, "interop tests")
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("/var/tmp", "gosanlock-bin-")
		if buildErr != nil {
			return
		}
		ourPath = filepath.Join(buildDir, "sanlock")
		out, err := exec.Command("go", "build", "-o", ourPath, "github.com/gosanlock/gosanlock/cmd/sanlock").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return ourPath
}

type result struct {
	stdout, stderr string
	exit           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.exit, r.stdout, r.stderr)
}

// run executes bin with argv[0] "sanlock" in dir (may be ""), bounded in time.
func run(t *testing.T, bin, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Args[0] = "sanlock"
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.exit = ee.ExitCode()
	default:
		t.Fatalf("running %s %v: %v\n%s", bin, args, err, r)
	}
	return r
}

// concurrent runs fn for every item as subtests of t, n at a time. Most of
// the time of a case is spent waiting for synchronous I/O of the two
// binaries, so running several at once keeps the suite short on 2 CPUs.
func concurrent[T any](t *testing.T, n int, items []T, name func(T) string, fn func(*testing.T, T)) {
	t.Helper()
	work := make(chan T)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				t.Run(name(it), func(t *testing.T) { fn(t, it) })
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

const parallelism = 6

func tmpDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "gosanlock-interop-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func pattern(size int64) []byte { return bytes.Repeat([]byte{0xFF}, int(size)) }

// losetup attaches a loop device over backing and detaches it at cleanup.
func losetup(t *testing.T, backing string, sector int) string {
	return testdisk.Loop(t, backing, sector)
}

// target is one file or loop device holding a test image.
type target struct {
	path string
	size int64
}

// newTarget creates a file or loop device of size bytes filled with content
// (0xFF pattern when nil). kind is "file", "loop512" or "loop4k".
func newTarget(t *testing.T, dir, name, kind string, size int64, content []byte) target {
	t.Helper()
	if content == nil {
		content = pattern(size)
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, content, 0o600))
	switch kind {
	case "file":
		return target{p, size}
	case "loop512":
		return target{losetup(t, p, 512), size}
	case "loop4k":
		return target{losetup(t, p, 4096), size}
	}
	t.Fatalf("unknown kind %q", kind)
	return target{}
}

// readAll reads a target with O_DIRECT, as sanlock sees it.
func readAll(t *testing.T, tg target) []byte {
	t.Helper()
	d, err := diskio.OpenFile(tg.path)
	require.NoError(t, err)
	defer d.Close()
	b := make([]byte, tg.size)
	require.NoError(t, d.ReadAt(context.Background(), b, 0))
	return b
}

// writeAll overwrites a target from offset 0 with O_DIRECT.
func writeAll(t *testing.T, path string, b []byte) {
	t.Helper()
	d, err := diskio.OpenFile(path)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.WriteAt(context.Background(), b, 0))
}

func hashOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "absent"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "error: " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diffReport describes the first difference of two images.
func diffReport(a, b []byte, sector int) string {
	if bytes.Equal(a, b) {
		return ""
	}
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return fmt.Sprintf("first difference at offset %d (sector %d, byte %d): real %#02x, ours %#02x",
				i, i/sector, i%sector, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("lengths differ: real %d, ours %d", len(a), len(b))
	}
	return ""
}

func requireSameImage(t *testing.T, theirs, ours []byte, sector int) {
	t.Helper()
	if d := diffReport(theirs, ours, sector); d != "" {
		t.Fatal(d)
	}
}

var reqHead = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, diskfmt.RequestMagic), diskfmt.RequestVersion)

// maskRequestPadding zeroes request_record bytes 20..23 wherever the real
// binary wrote a request record (at 512-byte steps), in both images. The
// real binary fills that padding from uninitialised memory (docs/ondisk.md "Request record");
// ours must write zeros there, which is checked.
func maskRequestPadding(t *testing.T, theirs, ours []byte) {
	t.Helper()
	for off := int64(0); off+512 <= int64(len(theirs)); off += 512 {
		if !bytes.Equal(theirs[off:off+8], reqHead) {
			continue
		}
		mask(theirs, off+20, 4)
		if off+512 <= int64(len(ours)) && bytes.Equal(ours[off:off+8], reqHead) {
			assert.Equal(t, make([]byte, 4), mask(ours, off+20, 4), "our request padding at %d is zero", off)
		}
	}
}

func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Sec)
}

// mask zeroes n bytes at off in b (when inside b) and returns what was there.
func mask(b []byte, off int64, n int) []byte {
	if off < 0 || off+int64(n) > int64(len(b)) {
		return nil
	}
	old := append([]byte(nil), b[off:off+int64(n)]...)
	clear(b[off : off+int64(n)])
	return old
}

var pairs = []struct {
	sector int
	align  string
	bytes  int64
}{
	{512, "1M", 1 << 20},
	{4096, "1M", 1 << 20},
	{4096, "2M", 2 << 20},
	{4096, "4M", 4 << 20},
	{4096, "8M", 8 << 20},
}

var kinds = []struct {
	name   string
	sector int
}{{"file", 512}, {"loop512", 512}, {"loop4k", 4096}}

// initCase is one writer command compared byte for byte.
type initCase struct {
	name string
	// layout for a given align size: offset of the written area, the total
	// target size, and the command (PATH replaced by the target path).
	off, size int64
	args      []string
	// clearAt: offsets of the CLEAR leaders the command writes.
	clearAt []int64
}

func initCases(align int64, sizeFlags []string) []initCase {
	const mb = 1 << 20
	with := func(a ...string) []string { return append(a, sizeFlags...) }
	return []initCase{
		{name: "init_s", off: 0, size: align + mb,
			args: with("direct", "init", "-s", "LS1:0:PATH:0")},
		{name: "init_s_o5", off: 0, size: align + mb,
			args: with("direct", "init", "-s", "LS1:0:PATH:0", "-o", "5")},
		{name: "init_r", off: mb, size: mb + align + mb,
			args: with("direct", "init", "-r", "LS1:RES1:PATH:1048576")},
		{name: "init_r_n10", off: mb, size: mb + align + mb,
			args: with("direct", "init", "-r", "LS1:RES1:PATH:1048576", "-n", "10")},
		{name: "init_r_z1", off: mb, size: mb + align + mb,
			args: with("direct", "init", "-r", "LS1:RES1:PATH:1048576", "-z", "1"), clearAt: []int64{mb}},
		{name: "format", off: align, size: 3*align + mb,
			args: with("direct", "format", "-x", fmt.Sprintf("LS1:PATH:%d", align))},
	}
}

func substPath(args []string, path string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "PATH", path)
	}
	return out
}

// compareInit runs one writer case with both binaries on identical fresh
// targets and compares the results byte for byte. It also checks that the
// real binary reads our image exactly as it reads its own.
func compareInit(t *testing.T, ours, kind string, sector int, c initCase) {
	dir := tmpDir(t)
	tTheirs := newTarget(t, dir, "theirs", kind, c.size, nil)
	tOurs := newTarget(t, dir, "ours", kind, c.size, nil)

	before := monotonic()
	rt := run(t, realSanlock, dir, nil, substPath(c.args, tTheirs.path)...)
	ro := run(t, ours, dir, nil, substPath(c.args, tOurs.path)...)
	after := monotonic()
	assert.Equal(t, rt.stdout, ro.stdout, "stdout (real: %s)", rt)
	assert.Equal(t, rt.exit, ro.exit, "exit status")

	it, io := readAll(t, tTheirs), readAll(t, tOurs)
	// request_record bytes 20..23 are padding that the real binary fills
	// from uninitialised memory (docs/ondisk.md "Request record"); ours writes zeros. Mask
	// them in both images, wherever the real binary wrote a request record.
	// A CLEAR leader (init -r -z 1) records the writer's monotonic time in
	// write_timestamp (offset 192): mask it too, after checking it is
	// plausible.
	maskRequestPadding(t, it, io)
	clears := 0
	for off := int64(0); off+512 <= int64(len(it)) && off+512 <= int64(len(io)); off += 512 {
		switch {
		case binary.LittleEndian.Uint32(it[off:]) == diskfmt.PaxosClear:
			clears++
			for who, img := range map[string][]byte{"real": it, "ours": io} {
				v := binary.LittleEndian.Uint64(img[off+192:])
				assert.True(t, v+1 >= before && v <= after+1, "%s write_timestamp %d not within [%d,%d]", who, v, before, after)
				mask(img, off+192, 8)
			}
		}
	}
	if len(c.clearAt) > 0 && rt.exit == 0 {
		assert.Equal(t, 1, clears, "CLEAR leaders written")
	}
	requireSameImage(t, it, io, sector)

	if rt.exit != 0 || kind != "file" {
		// Loop-device images were just shown byte-identical to the real
		// binary's; reading them back would add nothing but time.
		return
	}
	// The real binary reads our image as its own.
	readers := [][]string{
		{"direct", "dump", fmt.Sprintf("PATH:%d", c.off), "-f", "2"},
	}
	if c.name == "init_s" || c.name == "init_r" {
		readers = append(readers, []string{"direct", "dump", fmt.Sprintf("PATH:%d", c.off)},
			[]string{"direct", "dump", fmt.Sprintf("PATH:%d", c.off), "-f", "1"})
	}
	switch {
	case strings.HasPrefix(c.name, "init_s"):
		readers = append(readers, []string{"direct", "read_leader", "-s", "LS1:2:PATH:0"})
	case strings.HasPrefix(c.name, "init_r"):
		readers = append(readers, []string{"direct", "read_leader", "-r", "LS1:RES1:PATH:1048576"})
	case c.name == "format":
		readers = append(readers, []string{"direct", "read_leader", "-r", fmt.Sprintf("LS1:rindex_lease:PATH:%d", 2*c.off)},
			[]string{"direct", "lookup", "-x", fmt.Sprintf("LS1:PATH:%d", c.off)})
	}
	for _, args := range readers {
		a := run(t, realSanlock, dir, nil, substPath(args, tTheirs.path)...)
		b := run(t, realSanlock, dir, nil, substPath(args, tOurs.path)...)
		if len(c.clearAt) > 0 {
			// write_timestamp may differ by a second between the two inits.
			a.stdout = maskLines(a.stdout, "write_timestamp ")
			b.stdout = maskLines(b.stdout, "write_timestamp ")
		}
		assert.Equal(t, a.stdout, b.stdout, "real %v on our image", args)
		assert.Equal(t, a.exit, b.exit, "real %v exit on our image", args)
	}
}

func maskLines(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = prefix + "*"
		}
	}
	return strings.Join(lines, "\n")
}

type initItem struct {
	name, kind string
	sector     int
	c          initCase
}

func runInitItems(t *testing.T, ours string, items []initItem) {
	concurrent(t, parallelism, items, func(it initItem) string { return it.name },
		func(t *testing.T, it initItem) { compareInit(t, ours, it.kind, it.sector, it.c) })
}

func TestInteropInitByteExact(t *testing.T) {
	ours := interop(t)
	var items []initItem
	for _, k := range kinds {
		for _, p := range pairs {
			if p.sector < k.sector {
				continue // 512 sectors on a 4K device: TestInterop512On4K
			}
			flags := []string{"-Z", strconv.Itoa(p.sector), "-A", p.align}
			for _, c := range initCases(p.bytes, flags) {
				items = append(items, initItem{fmt.Sprintf("%s/%d_%s/%s", k.name, p.sector, p.align, c.name), k.name, p.sector, c})
			}
		}
	}
	runInitItems(t, ours, items)
}

// TestInteropInitDefaults: no -Z/-A, so the device sector size with the
// legacy align (and max_hosts 2000) is used.
func TestInteropInitDefaults(t *testing.T) {
	ours := interop(t)
	var items []initItem
	for _, k := range kinds {
		align := int64(diskfmt.LegacyAlign(k.sector))
		for _, c := range initCases(align, nil) {
			items = append(items, initItem{k.name + "/" + c.name, k.name, k.sector, c})
		}
	}
	runInitItems(t, ours, items)
}

// TestInteropSizeOptions: -Z/-A combinations the CLI accepts, rejects or
// half-applies, on regular files.
func TestInteropSizeOptions(t *testing.T) {
	ours := interop(t)
	var items []initItem
	for _, f := range [][]string{
		{"-Z", "512", "-A", "2M"}, {"-Z", "512", "-A", "8M"}, {"-Z", "4096"}, {"-Z", "512"}, {"-A", "1M"}, {"-A", "8M"},
		{"-Z", "1024"}, {"-Z", "1024", "-A", "1M"}, {"-A", "3M"}, {"-Z", "512", "-A", "3M"}, {"-Z", "4096", "-A", "16M"},
	} {
		for _, c := range initCases(1<<20, f) {
			if c.name == "init_s_o5" || c.name == "init_r_n10" {
				continue
			}
			items = append(items, initItem{strings.Join(f, "_") + "/" + c.name, "file", 512, c})
		}
	}
	runInitItems(t, ours, items)
}

// TestInterop512On4K: 512-byte sectors on a 4K loop device. init -s fails
// with -22 after the area write (sector 0 left with magic 0); init -r and
// format are single whole-area writes and succeed (docs/ondisk.md "Sizes at init").
func TestInterop512On4K(t *testing.T) {
	ours := interop(t)
	var items []initItem
	for _, c := range initCases(1<<20, []string{"-Z", "512", "-A", "1M"}) {
		items = append(items, initItem{c.name, "loop4k", 4096, c})
	}
	runInitItems(t, ours, items)
	t.Run("init_s_result", func(t *testing.T) {
		dir := tmpDir(t)
		tg := newTarget(t, dir, "dev", "loop4k", 2<<20, nil)
		r := run(t, realSanlock, dir, nil, "direct", "init", "-s", "LS:0:"+tg.path+":0", "-Z", "512", "-A", "1M")
		assert.Equal(t, "init done -22\n", r.stdout)
		assert.Equal(t, 1, r.exit)
		img := readAll(t, tg)
		assert.Equal(t, uint32(0), binary.LittleEndian.Uint32(img), "sector 0 magic")
	})
}

// --- bad input -----------------------------------------------------------

type badCase struct {
	name  string
	kind  string // "file" (default), "loop4k"
	size  int64
	setup func(t *testing.T, path string) // builds the initial content; nil: missing file
	args  []string
	// readOnly: the command must not change the target.
	readOnly bool
	// diverge, when set, says why we deliberately differ from the real
	// binary: ours must then fail (exit 1) and leave the target unchanged.
	diverge string
}

// image builders for bad-input setups, written with diskfmt (the content is
// the same for both binaries, so who built it does not matter).
func mem(size int64) []byte { return make([]byte, size) }

func lockspaceImage(t *testing.T, size int64, sector int, flags uint32, name string) []byte {
	m := &memDev{b: mem(size), ss: sector}
	require.NoError(t, diskfmt.WriteLockspace(context.Background(), m, 0, flags, name, 10, 0))
	return m.b
}

func resourceImage(t *testing.T, size int64, sector int, flags uint32, space, res string) []byte {
	m := &memDev{b: mem(size), ss: sector}
	require.NoError(t, diskfmt.WriteResource(context.Background(), []diskfmt.ResourceDisk{{Dev: m}}, flags,
		diskfmt.PaxosInit{SpaceName: space, ResourceName: res}))
	return m.b
}

// memDev is a trivial in-memory Device for building images.
type memDev struct {
	b  []byte
	ss int
}

func (m *memDev) ReadAt(_ context.Context, p []byte, off int64) error {
	copy(p, m.b[off:])
	return nil
}
func (m *memDev) WriteAt(_ context.Context, p []byte, off int64) error {
	copy(m.b[off:], p)
	return nil
}
func (m *memDev) SectorSize() int { return m.ss }
func (m *memDev) Close() error    { return nil }

func poke(b []byte, off int, v ...byte) []byte { copy(b[off:], v); return b }

func withContent(f func(t *testing.T) []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		b := f(t)
		if strings.HasPrefix(path, "/dev/") {
			writeAll(t, path, b)
			return
		}
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
}

func badCases(t *testing.T) []badCase {
	const mb = 1 << 20
	n48 := strings.Repeat("n", 48)
	n49 := strings.Repeat("n", 49)
	ls := func(t *testing.T) []byte { return lockspaceImage(t, mb, 512, 0, "LS") }
	res := func(t *testing.T) []byte { return resourceImage(t, mb, 512, 0, "LS", "R") }
	fresh := withContent(ls)
	freshRes := withContent(res)
	empty := withContent(func(*testing.T) []byte { return mem(mb) })
	var cs []badCase
	add := func(name string, setup func(*testing.T, string), readOnly bool, args ...string) {
		cs = append(cs, badCase{name: name, setup: setup, args: args, readOnly: readOnly})
	}

	// Missing file: nothing may be created.
	add("missing/read_leader_s", nil, true, "direct", "read_leader", "-s", "LS:1:PATH:0")
	add("missing/read_leader_r", nil, true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("missing/dump", nil, true, "direct", "dump", "PATH")
	add("missing/init_s", nil, true, "direct", "init", "-s", "LS:0:PATH:0")
	add("missing/init_r", nil, true, "direct", "init", "-r", "LS:R:PATH:0")
	add("missing/format", nil, true, "direct", "format", "-x", "LS:PATH:0")
	add("missing/lookup", nil, true, "direct", "lookup", "-x", "LS:PATH:0")

	// Truncated files.
	trunc := func(n int) func(*testing.T, string) {
		return withContent(func(t *testing.T) []byte { return ls(t)[:n] })
	}
	truncRes := func(n int) func(*testing.T, string) {
		return withContent(func(t *testing.T) []byte { return res(t)[:n] })
	}
	add("truncated/read_leader_s1", trunc(4096), true, "direct", "read_leader", "-s", "LS:1:PATH:0")
	add("truncated/read_leader_s2000", trunc(100000), true, "direct", "read_leader", "-s", "LS:2000:PATH:0")
	add("truncated/read_leader_s_short", trunc(1000), true, "direct", "read_leader", "-s", "LS:1:PATH:0")
	add("truncated/dump", trunc(100000), true, "direct", "dump", "PATH")
	add("truncated/dump_f1", trunc(4096), true, "direct", "dump", "PATH", "-f", "1")
	add("truncated/dump_Z", trunc(100000), true, "direct", "dump", "PATH", "-Z", "512", "-A", "1M")
	add("truncated/read_leader_r", truncRes(4096), true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("truncated/read_leader_r_short", truncRes(512), true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("truncated/dump_res_f2", truncRes(8192), true, "direct", "dump", "PATH", "-f", "2")
	add("empty_file/read_leader_s", withContent(func(*testing.T) []byte { return nil }), true, "direct", "read_leader", "-s", "LS:1:PATH:0")
	add("empty_file/dump", withContent(func(*testing.T) []byte { return nil }), true, "direct", "dump", "PATH")
	add("zero_file/read_leader_s", empty, true, "direct", "read_leader", "-s", "LS:1:PATH:0")
	add("zero_file/read_leader_r", empty, true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("zero_file/dump", empty, true, "direct", "dump", "PATH")
	add("zero_file/dump_Z", empty, true, "direct", "dump", "PATH", "-Z", "512", "-A", "1M")

	// Corrupted leaders.
	corrupt := func(base func(*testing.T) []byte, off int, v ...byte) func(*testing.T, string) {
		return withContent(func(t *testing.T) []byte { return poke(base(t), off, v...) })
	}
	for _, c := range []struct {
		name string
		off  int
		v    []byte
	}{
		{"wrong_magic", 0, []byte{0x11}},
		{"wrong_version", 6, []byte{0x08}}, // major 8: no release reads it (4 and 5 are 5.x delta versions)
		{"minor_version", 4, []byte{0x09}},
		{"bad_checksum", 16, []byte{0x01}},
		{"bad_checksum_field", 168, []byte{0x00, 0x00}},
		{"io_timeout_changed", 174, []byte{0x63}},
		{"sector_size_1024", 12, []byte{0x00, 0x04}},
	} {
		add(c.name+"/ls/read_leader_s1", corrupt(ls, c.off, c.v...), true, "direct", "read_leader", "-s", "LS:1:PATH:0")
		add(c.name+"/ls/read_leader_s2", corrupt(ls, c.off+512, c.v...), true, "direct", "read_leader", "-s", "LS:2:PATH:0")
		add(c.name+"/ls/dump_f1", corrupt(ls, c.off, c.v...), true, "direct", "dump", "PATH", "-f", "1")
		add(c.name+"/res/read_leader_r", corrupt(res, c.off, c.v...), true, "direct", "read_leader", "-r", "LS:R:PATH:0")
		add(c.name+"/res/dump_f2", corrupt(res, c.off, c.v...), true, "direct", "dump", "PATH", "-f", "2")
	}
	add("clear_magic/read_leader_r", corrupt(res, 0, 0x16, 0x20, 0x28, 0x11), true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("clear_magic/dump", corrupt(res, 0, 0x16, 0x20, 0x28, 0x11), true, "direct", "dump", "PATH")
	add("wrong_name/read_leader_s", fresh, true, "direct", "read_leader", "-s", "LS9:1:PATH:0")
	add("wrong_name/read_leader_r_space", freshRes, true, "direct", "read_leader", "-r", "LSX:R:PATH:0")
	add("wrong_name/read_leader_r_res", freshRes, true, "direct", "read_leader", "-r", "LS:RX:PATH:0")
	add("host_id_0/read_leader_s", fresh, true, "direct", "read_leader", "-s", "LS:0:PATH:0")
	add("host_id_past_max/read_leader_s", fresh, true, "direct", "read_leader", "-s", "LS:2001:PATH:0")
	add("delta_as_paxos/read_leader_r", fresh, true, "direct", "read_leader", "-r", "LS:R:PATH:0")
	add("paxos_as_delta/read_leader_s", freshRes, true, "direct", "read_leader", "-s", "LS:1:PATH:0")

	// Malformed lockspace/resource/rindex strings.
	for _, s := range []string{"LS", "LS:1", "LS:x:PATH:0", ":1:PATH:0", "LS:1:PATH", "LS:1:PATH:abc", "LS:1:PATH:1M", "LS:1::0"} {
		add("bad_s/read_leader/"+s, fresh, true, "direct", "read_leader", "-s", s)
	}
	for _, s := range []string{"LS", "LS:R", "LS:R:PATH", "LS:R:PATH:abc", "LS:R:PATH:0:PATH", "::::", "LS:R:PATH:0:SH",
		"LS:R:PATH:0:7", "a:b:c:1:d:2:e:3:f:4:g:5", "LS:R:PATH:0\\"} {
		add("bad_r/read_leader/"+s, freshRes, true, "direct", "read_leader", "-r", s)
		add("bad_r/init/"+s, empty, false, "direct", "init", "-r", s)
	}
	for _, s := range []string{"LS", "LS:0", "LS:1:PATH:0:extra", "LS:0:PATH:xyz"} {
		add("bad_s/init/"+s, empty, false, "direct", "init", "-s", s)
	}
	for _, s := range []string{"LS", "LS:PATH", "LS:PATH:abc", "LS:PATH:1M"} {
		add("bad_x/format/"+s, withContent(func(*testing.T) []byte { return mem(4 * mb) }), false, "direct", "format", "-x", s)
		add("bad_x/lookup/"+s, withContent(func(*testing.T) []byte { return mem(4 * mb) }), true, "direct", "lookup", "-x", s)
	}

	// 48- and 49-byte names.
	add("name48/init_s", empty, false, "direct", "init", "-s", n48+":0:PATH:0")
	// A lockspace name over 48 bytes: the real binary cuts it, ours refuses
	// (docs/compat.md "Deliberate differences").
	cut := "a lockspace name over 48 bytes is refused, not cut"
	cs = append(cs, badCase{name: "name49/init_s", setup: empty, diverge: cut,
		args: []string{"direct", "init", "-s", n49 + ":0:PATH:0"}})
	add("name48/init_r", empty, false, "direct", "init", "-r", n48+":"+n48+":PATH:0")
	add("name49/init_r_space", empty, false, "direct", "init", "-r", n49+":R:PATH:0")
	add("name49/init_r_res", empty, false, "direct", "init", "-r", "LS:"+n49+":PATH:0")
	cs = append(cs, badCase{name: "name49/format", setup: withContent(func(*testing.T) []byte { return mem(3 * mb) }),
		diverge: cut, args: []string{"direct", "format", "-x", n49 + ":PATH:0"}})
	ls48 := withContent(func(t *testing.T) []byte { return lockspaceImage(t, mb, 512, 0, n48) })
	add("name48/read_leader_s", ls48, true, "direct", "read_leader", "-s", n48+":1:PATH:0")
	cs = append(cs, badCase{name: "name49/read_leader_s", setup: ls48, readOnly: true, diverge: cut,
		args: []string{"direct", "read_leader", "-s", n49 + ":1:PATH:0"}})
	add("name49/read_leader_r", freshRes, true, "direct", "read_leader", "-r", "LS:"+n49+":PATH:0")

	// rindex operations: format at 4M, RX1 at 6M, a CLEARed lease at 7M
	// and RX3 at 8M; entry RX3 recorded, RX1 not.
	rx := withContent(func(t *testing.T) []byte {
		m := &memDev{b: mem(10 * mb), ss: 512}
		ctx := context.Background()
		require.NoError(t, diskfmt.FormatRindex(ctx, m, 4*mb, 0, "LS", 0))
		for i, r := range []string{"RX1", "RX2", "RX3"} {
			require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: int64(6+i) * mb}}, 0,
				diskfmt.PaxosInit{SpaceName: "LS", ResourceName: r, Clear: r == "RX2", ClearTime: 77}))
		}
		ri, err := diskfmt.OpenRindex(ctx, m, 4*mb, "LS", 512)
		require.NoError(t, err)
		require.NoError(t, ri.UpdateEntry(ctx, "RX3", 8*mb, false))
		return m.b
	})
	const x = "LS:PATH:4194304"
	add("rindex/update_add", rx, false, "direct", "update", "-x", x, "-e", "RX1:6291456")
	add("rindex/update_add_z0", rx, false, "direct", "update", "-x", x, "-e", "RX1:6291456", "-z", "0")
	add("rindex/update_remove", rx, false, "direct", "update", "-x", x, "-e", ":8388608", "-z", "1")
	add("rindex/update_remove_named", rx, false, "direct", "update", "-x", x, "-e", "RX3:8388608", "-z", "1")
	add("rindex/update_unaligned", rx, true, "direct", "update", "-x", x, "-e", "RX1:6291457")
	// The real binary does not bounds-check the entry index of update: an
	// offset below the first lease (index -1, -3) writes an entry into the
	// header sector (bytes 448.., 320..), and a far offset (index 20000)
	// writes into the rindex_lease area; it prints "update done 0". We refuse
	// with -277 and write nothing.
	unsafe := "real update writes outside the rindex entry area"
	cs = append(cs,
		badCase{name: "rindex/update_below", setup: rx, diverge: unsafe,
			args: []string{"direct", "update", "-x", x, "-e", "RX1:5242880"}},
		badCase{name: "rindex/update_below_3", setup: rx, diverge: unsafe,
			args: []string{"direct", "update", "-x", x, "-e", "RX1:3145728"}},
		badCase{name: "rindex/update_far", setup: rx, diverge: unsafe,
			args: []string{"direct", "update", "-x", x, "-e", fmt.Sprintf("RX1:%d", int64(4*mb)+(2+20000)*int64(mb))}})
	add("rindex/update_past_max_resources", rx, false, "direct", "update", "-x", x, "-e", fmt.Sprintf("RX1:%d", int64(4*mb)+(2+4096)*int64(mb)))
	add("rindex/update_no_offset", rx, true, "direct", "update", "-x", x, "-e", "RX1")
	add("rindex/update_no_e", rx, true, "direct", "update", "-x", x)
	add("rindex/update_wrong_ls", rx, true, "direct", "update", "-x", "LX:PATH:4194304", "-e", "RX1:6291456")
	add("rindex/update_wrong_off", rx, true, "direct", "update", "-x", "LS:PATH:3145728", "-e", "RX1:6291456")
	add("rindex/rebuild", rx, false, "direct", "rebuild", "-x", x)
	add("rindex/rebuild_wrong_ls", rx, true, "direct", "rebuild", "-x", "LX:PATH:4194304")
	add("rindex/lookup_free", rx, true, "direct", "lookup", "-x", x)
	add("rindex/lookup_RX3", rx, true, "direct", "lookup", "-x", x, "-e", "RX3")
	add("rindex/lookup_RX1", rx, true, "direct", "lookup", "-x", x, "-e", "RX1")
	add("rindex/lookup_off", rx, true, "direct", "lookup", "-x", x, "-e", ":8388608")
	add("rindex/lookup_diff", rx, true, "direct", "lookup", "-x", x, "-e", "RX1:8388608")
	add("rindex/lookup_wrong_magic", rx, true, "direct", "lookup", "-x", "LS:PATH:5242880")
	add("rindex/dump_f1", rx, true, "direct", "dump", "PATH:4194304", "-f", "1")
	add("rindex/dump_size_f2", rx, true, "direct", "dump", "PATH:4194304:6M", "-f", "2")
	add("rindex/next_free", rx, true, "direct", "next_free", "PATH:4194304", "-Z", "512", "-A", "1M")
	add("rindex/format_again", rx, false, "direct", "format", "-x", x)

	// Sector/align mismatch on a 4K loop device.
	ls4k := withContent(func(t *testing.T) []byte { return lockspaceImage(t, 8*mb, 4096, 0, "LS") })
	for _, c := range []badCase{
		{name: "4k/init_s_512", setup: withContent(func(*testing.T) []byte { return mem(2 * mb) }),
			args: []string{"direct", "init", "-s", "LS:0:PATH:0", "-Z", "512", "-A", "1M"}},
		{name: "4k/read_leader_s_Z512", setup: ls4k, readOnly: true,
			args: []string{"direct", "read_leader", "-s", "LS:1:PATH:0", "-Z", "512", "-A", "1M"}},
		{name: "4k/read_leader_s", setup: ls4k, readOnly: true,
			args: []string{"direct", "read_leader", "-s", "LS:2:PATH:0"}},
		{name: "4k/dump_Z512", setup: ls4k, readOnly: true,
			args: []string{"direct", "dump", "PATH", "-Z", "512", "-A", "1M"}},
		{name: "4k/dump", setup: ls4k, readOnly: true, args: []string{"direct", "dump", "PATH", "-f", "1"}},
		{name: "4k/read_leader_s_on_512_image", setup: withContent(func(t *testing.T) []byte { return lockspaceImage(t, 2*mb, 512, 0, "LS") }),
			readOnly: true, args: []string{"direct", "read_leader", "-s", "LS:1:PATH:0"}},
		{name: "4k/dump_512_image", setup: withContent(func(t *testing.T) []byte { return lockspaceImage(t, 2*mb, 512, 0, "LS") }),
			readOnly: true, args: []string{"direct", "dump", "PATH", "-f", "2"}},
	} {
		c.kind = "loop4k"
		c.size = 8 * mb
		cs = append(cs, c)
	}
	return cs
}

// TestInteropBadInput runs each bad-input case with both binaries on the
// same path, rebuilt identically before each run, and requires the same
// stdout, exit status and resulting content (unchanged for read commands).
func TestInteropBadInput(t *testing.T) {
	ours := interop(t)
	concurrent(t, parallelism, badCases(t), func(c badCase) string { return c.name }, func(t *testing.T, c badCase) {
		{
			dir := tmpDir(t)
			path := filepath.Join(dir, "disk")
			if c.kind == "loop4k" {
				tg := newTarget(t, dir, "backing", "loop4k", c.size, mem(c.size))
				path = tg.path
			}
			args := substPath(c.args, path)
			// content returns the target's bytes (nil when the file does
			// not exist; files may be created or extended by a command).
			content := func() []byte {
				if strings.HasPrefix(path, "/dev/") {
					return readAll(t, target{path, c.size})
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return nil
				}
				return b
			}
			prepare := func() []byte {
				if !strings.HasPrefix(path, "/dev/") {
					os.Remove(path)
				}
				if c.setup != nil {
					c.setup(t, path)
				}
				return content()
			}
			do := func(bin string) (result, []byte) {
				before := prepare()
				r := run(t, bin, dir, nil, args...)
				after := content()
				if c.readOnly {
					assert.True(t, bytes.Equal(before, after) && (before == nil) == (after == nil), "%s changed the target", bin)
				}
				return r, after
			}
			if c.diverge != "" {
				ro, ho := do(ours)
				before := prepare()
				assert.Equal(t, 1, ro.exit, "ours must fail (%s): %s", c.diverge, ro)
				assert.True(t, bytes.Equal(before, ho), "ours must not write (%s)", c.diverge)
				return
			}
			rt, ht := do(realSanlock)
			rt2 := rt
			if c.args[1] == "read_leader" && rt.exit != 0 {
				// read_leader prints what it read even on failure: run it
				// twice to see whether that output is deterministic.
				rt2, _ = do(realSanlock)
			}
			ro, ho := do(ours)

			assert.Equal(t, rt.exit, ro.exit, "exit status; real: %s\nours: %s", rt, ro)
			if rt.stdout == rt2.stdout {
				assert.Equal(t, rt.stdout, ro.stdout, "stdout")
			} else {
				// The real read_leader prints uninitialised memory when the
				// read fails (docs/ondisk.md says zeros); only the result line is
				// deterministic.
				first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
				assert.Equal(t, first(rt.stdout), first(ro.stdout), "first stdout line (real output is not deterministic)")
			}
			assert.Equal(t, ht == nil, ho == nil, "file existence after the command")
			maskRequestPadding(t, ht, ho)
			if d := diffReport(ht, ho, 512); d != "" {
				t.Errorf("resulting content differs: %s", d)
			}
		}
	})
}

// --- golden images written by a real daemon ---------------------------------

type goldenRecord struct {
	Name   string   `json:"name"`
	Args   []string `json:"args"`
	Stdout string   `json:"stdout"`
	Exit   int      `json:"exit"`
}

const goldenDir = "../../testdata/golden"

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	return b
}

// TestInteropGoldenReaders runs every read-only command recorded for the
// golden images (dump, read_leader, lookup, next_free) with both binaries on
// a fresh copy of the image and compares the outputs.
func TestInteropGoldenReaders(t *testing.T) {
	ours := interop(t)
	imgs, _ := filepath.Glob(filepath.Join(goldenDir, "*.img.gz"))
	if len(imgs) == 0 {
		t.Skip("no golden images")
	}
	for _, gz := range imgs {
		base := strings.TrimSuffix(filepath.Base(gz), ".img.gz")
		js, err := os.ReadFile(filepath.Join(goldenDir, base+".outputs.json"))
		if err != nil {
			continue
		}
		var recs []goldenRecord
		require.NoError(t, json.Unmarshal(js, &recs))
		img := gunzip(t, gz)
		t.Run(base, func(t *testing.T) {
			dir := tmpDir(t)
			path := filepath.Join(dir, "img")
			require.NoError(t, os.WriteFile(path, img, 0o600))
			h := hashOf(path)
			for _, r := range recs {
				if len(r.Args) < 2 || r.Args[0] != "direct" {
					continue
				}
				args := make([]string, len(r.Args))
				for i, a := range r.Args {
					args[i] = strings.ReplaceAll(a, "{IMG}", path)
				}
				t.Run(r.Name, func(t *testing.T) {
					rt := run(t, realSanlock, dir, nil, args...)
					require.Equal(t, h, hashOf(path), "real binary changed the image")
					ro := run(t, ours, dir, nil, args...)
					require.Equal(t, h, hashOf(path), "our binary changed the image")
					assert.Equal(t, rt.stdout, ro.stdout, "stdout")
					assert.Equal(t, rt.exit, ro.exit, "exit")
					// The recording was made from the same bytes.
					assert.Equal(t, strings.ReplaceAll(r.Stdout, "{IMG}", path), rt.stdout, "golden record is stale")
				})
			}
		})
	}
}

// --- live daemon -----------------------------------------------------------

type daemon struct {
	env    []string
	runDir string
	cmd    *exec.Cmd
	log    string
}

// startDaemon starts a real, unprivileged sanlock daemon with a private run
// directory. Cleanup removes the given lockspaces, then kills it by pid.
func startDaemon(t *testing.T, dir string) *daemon {
	t.Helper()
	runDir, err := os.MkdirTemp("/tmp", "gosanlock-run-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	d := &daemon{runDir: runDir, env: []string{"SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR=" + runDir}, log: filepath.Join(dir, "daemon.log")}
	logf, err := os.Create(d.log)
	require.NoError(t, err)
	d.cmd = exec.Command(realSanlock, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1", "-e", "gosanlock-interop")
	d.cmd.Env = append(os.Environ(), d.env...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	require.NoError(t, d.cmd.Start())
	logf.Close()
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			return // reaped: its pid may belong to another process by now
		default:
		}
		pid := d.cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
	})
	require.Eventually(t, func() bool {
		r := run(t, realSanlock, dir, d.env, "client", "status")
		return r.exit == 0
	}, 15*time.Second, 200*time.Millisecond, "daemon did not start")
	return d
}

func (d *daemon) status(t *testing.T) string {
	return run(t, realSanlock, "", d.env, "client", "status").stdout
}

func countLines(s, prefix string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			n++
		}
	}
	return n
}

// TestInteropLiveDaemon compares our and the real dump/read_leader on a file
// that a real daemon is using: while leases are held (timestamps change with
// every renewal, so our output must equal one of the real outputs taken just
// before and just after it), and after release and rem_lockspace (exactly).
func TestInteropLiveDaemon(t *testing.T) {
	ours := interop(t)
	dir := tmpDir(t)
	path := filepath.Join(dir, "live.img")
	require.NoError(t, os.WriteFile(path, mem(5<<20), 0o600))
	// io_timeout 1 in the delta leases makes add_lockspace take ~3 s.
	for _, args := range [][]string{
		{"direct", "init", "-s", "LS:0:" + path + ":0", "-o", "1", "-Z", "512", "-A", "1M"},
		{"direct", "init", "-r", "LS:RA:" + path + ":1048576", "-Z", "512", "-A", "1M"},
		{"direct", "init", "-r", "LS:RB:" + path + ":2097152", "-Z", "512", "-A", "1M"},
		{"direct", "format", "-x", "LS:" + path + ":3145728", "-Z", "512", "-A", "1M"},
	} {
		r := run(t, realSanlock, dir, nil, args...)
		require.Equal(t, 0, r.exit, "%v: %s", args, r)
	}
	d := startDaemon(t, dir)
	lsArg := "LS:1:" + path + ":0"
	r := run(t, realSanlock, dir, d.env, "client", "add_lockspace", "-o", "1", "-s", lsArg)
	require.Equal(t, 0, r.exit, "add_lockspace: %s", r)
	lsAdded := true
	t.Cleanup(func() {
		if lsAdded {
			run(t, realSanlock, dir, d.env, "client", "rem_lockspace", "-s", lsArg)
		}
	})

	var holders []*exec.Cmd
	for _, res := range []string{"LS:RA:" + path + ":1048576", "LS:RB:" + path + ":2097152:SH"} {
		c := exec.Command(realSanlock, "client", "command", "-r", res, "-c", "/bin/sleep", "60")
		c.Env = append(os.Environ(), d.env...)
		require.NoError(t, c.Start())
		holders = append(holders, c)
		t.Cleanup(func() {
			_ = syscall.Kill(c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		})
	}
	require.Eventually(t, func() bool { return countLines(d.status(t), "r ") >= 2 }, 30*time.Second, 200*time.Millisecond,
		"leases not acquired: %s", d.status(t))
	run(t, realSanlock, dir, d.env, "client", "set_event", "-s", "LS", "-i", "9", "-g", "0", "-e", "0x11", "-d", "0x22")
	time.Sleep(3 * time.Second) // let a renewal write the event and bitmap

	readers := [][]string{
		{"direct", "dump", path},
		{"direct", "dump", path, "-f", "1"},
		{"direct", "dump", path, "-f", "2"},
		{"direct", "read_leader", "-s", lsArg},
		{"direct", "read_leader", "-s", "LS:2:" + path + ":0"},
		{"direct", "read_leader", "-r", "LS:RA:" + path + ":1048576"},
		{"direct", "read_leader", "-r", "LS:RB:" + path + ":2097152"},
		{"direct", "read_leader", "-r", "LS:rindex_lease:" + path + ":4194304"},
		{"direct", "lookup", "-x", "LS:" + path + ":3145728"},
	}
	t.Run("held", func(t *testing.T) {
		for _, args := range readers {
			var a, o, b result
			for range 3 {
				a = run(t, realSanlock, dir, nil, args...)
				o = run(t, ours, dir, nil, args...)
				b = run(t, realSanlock, dir, nil, args...)
				if a.stdout == b.stdout {
					break // no renewal in between
				}
			}
			if o.stdout != a.stdout && o.stdout != b.stdout {
				assert.Equal(t, a.stdout, o.stdout, "%v while held", args[1:])
			}
			assert.Equal(t, a.exit, o.exit, "%v exit", args[1:])
		}
	})

	for _, c := range holders {
		_ = syscall.Kill(c.Process.Pid, syscall.SIGTERM)
	}
	require.Eventually(t, func() bool { return countLines(d.status(t), "r ") == 0 }, 30*time.Second, 200*time.Millisecond,
		"leases not released")
	r = run(t, realSanlock, dir, d.env, "client", "rem_lockspace", "-s", lsArg)
	require.Equal(t, 0, r.exit, "rem_lockspace: %s", r)
	lsAdded = false

	t.Run("released", func(t *testing.T) {
		for _, args := range readers {
			a := run(t, realSanlock, dir, nil, args...)
			o := run(t, ours, dir, nil, args...)
			assert.Equal(t, a.stdout, o.stdout, "%v after release", args[1:])
			assert.Equal(t, a.exit, o.exit, "%v exit", args[1:])
		}
		// The timestamps are gone; make sure the dump shows the released state.
		a := run(t, realSanlock, dir, nil, "direct", "dump", path)
		assert.Regexp(t, regexp.MustCompile(`(?m)^00000000 +LS +gosanlock-interop 0000000000 0001 0001$`), a.stdout)
	})
}
