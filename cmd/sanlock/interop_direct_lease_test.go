package main

// Differential tests of the direct lease actions (acquire_id, renew_id,
// release_id, acquire, release, write_leader) against the real sanlock
// 3.8.5: each case starts from identical images for both binaries (files,
// 512 and 4K loop devices), runs the same steps with each binary on its own
// copy (at the same time, so timestamps agree within a second or two), and
// compares stdout, exit status and the resulting bytes. Timestamps, the
// checksums that cover them and random host names are masked, after
// checking that both sides agree on which are zero and which checksums are
// valid. Deliberate differences (sanlock crashes or writes somewhere it
// should not) are marked "diverge": ours must fail and leave the disk alone.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gsdaemon "github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// leaseStep is one command, run by both binaries on their own targets.
type leaseStep struct {
	args []string // PATH, PATH2 and FILE are substituted
	file string   // content of FILE (the -F input), written before the step
	// diverge: we deliberately differ (why); ours must exit 1 and write
	// nothing, the real binary is not run.
	diverge string
	// doneOnly: the real binary's other output is not deterministic
	// (uninitialised memory); compare only the "done" line.
	doneOnly bool
	// realBadSum: the real binary writes an uninitialised checksum into
	// delta leases (write_leader -s); their validity is not compared.
	realBadSum bool
	// sumAt: a leader written outside the lease areas (an absolute
	// offset) whose checksum the real binary leaves uninitialised.
	sumAt int64
}

// leaseArea is a lease region of the images, normalised before comparing.
type leaseArea struct {
	off   int64
	paxos bool
}

type leaseCase struct {
	name   string
	kind   string // file, loop512, loop4k
	size   int64
	image  func(t *testing.T) []byte
	disks  int // targets per side (PATH, PATH2); default 1
	areas  []leaseArea
	sector int
	steps  []leaseStep
	// randomName: the host name in delta leases is generated (no -e).
	randomName bool
}

// images built with diskfmt: the same bytes for both binaries.
func buildImage(t *testing.T, size int64, sector int, build func(ctx context.Context, m *memDev)) []byte {
	m := &memDev{b: mem(size), ss: sector}
	build(context.Background(), m)
	return m.b
}

func flagsFor(sector int) uint32 {
	if sector == 4096 {
		return diskfmt.FlagSector4K | diskfmt.FlagAlign1M
	}
	return diskfmt.FlagSector512 | diskfmt.FlagAlign1M
}

// lsResImage: lockspace LS (io_timeout 1) at 0, resources R at 1M and R2
// at 2M.
func lsResImage(sector int) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		return buildImage(t, 4<<20, sector, func(ctx context.Context, m *memDev) {
			require.NoError(t, diskfmt.WriteLockspace(ctx, m, 0, flagsFor(sector), "LS", 1, 0))
			for i, r := range []string{"R", "R2"} {
				require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: int64(i+1) << 20}},
					flagsFor(sector), diskfmt.PaxosInit{SpaceName: "LS", ResourceName: r}))
			}
		})
	}
}

// putLeader seals l into the sector at off of img.
func putLeader(img []byte, off int64, ss int, l diskfmt.Leader) {
	clear(img[off : off+int64(ss)])
	l.Seal(img[off:])
}

func leaderAt(t *testing.T, img []byte, off int64) diskfmt.Leader {
	l, err := diskfmt.DecodeLeader(img[off:])
	require.NoError(t, err)
	return l
}

var (
	timeLines = regexp.MustCompile(`(?m)^(timestamp|write_timestamp|checksum) .*$`)
	genSums   = regexp.MustCompile(`(generated checksum|generated is) [0-9a-f]+`)
	dumpTimes = regexp.MustCompile(`(?m)^(\d{8} .{36} .{48} )\d{10}`)
	dumpInp3  = regexp.MustCompile(`(?m)^(dblock.* inp3 )\d+(.* sum )[0-9a-f]+$`)
)

// maskTimes hides what depends on the clock in read_leader, write_leader
// and dump output.
func maskTimes(s string) string {
	s = timeLines.ReplaceAllString(s, "$1 *")
	s = genSums.ReplaceAllString(s, "$1 *")
	s = dumpTimes.ReplaceAllString(s, "${1}*")
	return dumpInp3.ReplaceAllString(s, "${1}*${2}*")
}

func doneLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, " done ") {
			return l
		}
	}
	return ""
}

var zeros = make([]byte, 64)

var hostNameRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.`)

// normalise masks, in b, the fields that depend on the clock
// (and random host names), and returns a summary of what was masked:
// whether each timestamp was zero and each checksum valid (when asked), for
// comparison.
func normalise(t *testing.T, c *leaseCase, b []byte, sumValidity, deltaSumValidity bool) string {
	ss := c.sector
	var sum strings.Builder
	le := binary.LittleEndian
	// Only the exceptions are listed (non-zero times, bad checksums): the
	// race detector makes formatting thousands of lines per step slow.
	field := func(off int64, n int, what string) {
		if off+int64(n) > int64(len(b)) {
			return
		}
		if !bytes.Equal(b[off:off+int64(n)], zeros[:n]) {
			fmt.Fprintf(&sum, "%d %s set\n", off, what)
		}
		clear(b[off : off+int64(n)])
	}
	checksum := func(off int64, n int, what string, valid bool) {
		if valid && diskfmt.Checksum(b[off:off+int64(n)]) != le.Uint32(b[off+int64(n):]) {
			fmt.Fprintf(&sum, "%d %s invalid\n", off, what)
		}
		clear(b[off+int64(n) : off+int64(n)+4])
	}
	for _, a := range c.areas {
		if a.off+diskfmt.MiB > int64(len(b)) {
			continue
		}
		if !a.paxos {
			for s := a.off; s < a.off+diskfmt.MiB; s += int64(ss) {
				if le.Uint32(b[s:]) != diskfmt.DeltaMagic {
					continue
				}
				if c.randomName {
					name := diskfmt.NameString(b[s+104 : s+152])
					if name != "" {
						assert.Regexp(t, hostNameRe, name, "generated host name")
						assert.True(t, strings.HasSuffix(name, "."+gsdaemon.Nodename()), "host name %q ends with the node name", name)
					}
					clear(b[s+104 : s+152])
				}
				field(s+152, 8, "timestamp")
				checksum(s, diskfmt.LeaderChecksumLen, "leader checksum", sumValidity && deltaSumValidity)
			}
			continue
		}
		if le.Uint32(b[a.off:]) != diskfmt.PaxosMagic {
			continue
		}
		field(a.off+152, 8, "timestamp")
		field(a.off+192, 8, "write_timestamp")
		checksum(a.off, diskfmt.LeaderChecksumLen, "leader checksum", sumValidity)
		for s := a.off + 2*int64(ss); s < a.off+diskfmt.MiB; s += int64(ss) {
			if bytes.Equal(b[s:s+diskfmt.DblockSize], zeros[:diskfmt.DblockSize]) {
				continue
			}
			field(s+32, 8, "inp3")
			checksum(s, diskfmt.DblockChecksumLen, "dblock checksum", sumValidity)
		}
	}
	return sum.String()
}

// runLeaseCase runs one case with both binaries side by side.
func runLeaseCase(t *testing.T, ours string, c leaseCase) {
	dir := tmpDir(t)
	ndisks := max(c.disks, 1)
	img := c.image(t)
	side := func(who string) []target {
		var ts []target
		for i := range ndisks {
			ts = append(ts, newTarget(t, dir, fmt.Sprintf("%s%d", who, i), c.kind, c.size, append([]byte(nil), img...)))
		}
		return ts
	}
	theirs, mine := side("theirs"), side("ours")
	fileArg := filepath.Join(dir, "leader-input")
	subst := func(args []string, ts []target) []string {
		out := make([]string, len(args))
		for i, a := range args {
			if ndisks > 1 {
				a = strings.ReplaceAll(a, "PATH2", ts[1].path)
			}
			a = strings.ReplaceAll(a, "PATH", ts[0].path)
			out[i] = strings.ReplaceAll(a, "FILE", fileArg)
		}
		return out
	}
	images := func(ts []target) [][]byte {
		var out [][]byte
		for _, tg := range ts {
			out = append(out, readAll(t, tg))
		}
		return out
	}
	timed := false
	// badSums: the real binary wrote an uninitialised checksum in an
	// earlier step; delta leaders' checksum validity is not compared.
	badSums := false
	var sumsAt []int64
	for i, st := range c.steps {
		name := fmt.Sprintf("step %d %v", i, st.args)
		if st.file != "" {
			require.NoError(t, os.WriteFile(fileArg, []byte(st.file), 0o600))
		}
		if st.diverge != "" {
			before := images(mine)
			ro := run(t, ours, dir, nil, subst(st.args, mine)...)
			assert.Equal(t, 1, ro.exit, "%s: ours must fail (%s): %s", name, st.diverge, ro)
			assert.Equal(t, before, images(mine), "%s: ours must not write (%s)", name, st.diverge)
			continue
		}
		if st.sumAt != 0 {
			sumsAt = append(sumsAt, st.sumAt)
		}
		var rt, ro result
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); rt = run(t, realSanlock, dir, nil, subst(st.args, theirs)...) }()
		go func() { defer wg.Done(); ro = run(t, ours, dir, nil, subst(st.args, mine)...) }()
		wg.Wait()
		switch st.args[1] {
		case "acquire_id", "renew_id", "acquire", "release":
			timed = true
		}
		assert.Equal(t, rt.exit, ro.exit, "%s: exit; real: %s\nours: %s", name, rt, ro)
		switch {
		case st.doneOnly:
			assert.Equal(t, doneLine(rt.stdout), doneLine(ro.stdout), "%s: done line", name)
		case timed:
			assert.Equal(t, maskTimes(rt.stdout), maskTimes(ro.stdout), "%s: stdout (times masked)", name)
		default:
			assert.Equal(t, rt.stdout, ro.stdout, "%s: stdout", name)
		}
		it, io := images(theirs), images(mine)
		for d := range it {
			maskRequestPadding(t, it[d], io[d])
			for _, off := range sumsAt {
				mask(it[d], off+168, 4)
				mask(io[d], off+168, 4)
			}
			nt, no := it[d], io[d]
			st1 := normalise(t, &c, nt, !st.realBadSum, !badSums)
			so := normalise(t, &c, no, !st.realBadSum, !badSums)
			if st1 != so {
				t.Errorf("%s: disk %d: zero timestamps / valid checksums differ: %s", name, d, firstLineDiff(st1, so))
			}
			if dr := diffReport(nt, no, c.sector); dr != "" {
				t.Errorf("%s: disk %d: %s", name, d, dr)
			}
		}
		badSums = badSums || st.realBadSum
		if t.Failed() {
			return
		}
	}
}

// firstLineDiff shows the first differing line of two summaries.
func firstLineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("real %q, ours %q", la[i], lb[i])
		}
	}
	return fmt.Sprintf("real %d lines, ours %d", len(la), len(lb))
}

func ls(id string) string  { return "LS:" + id + ":PATH:0" }
func res(r string) string  { return "LS:" + r + ":PATH:1048576" }
func res2(r string) string { return "LS:" + r + ":PATH:2097152" }

func step(args ...string) leaseStep { return leaseStep{args: append([]string{"direct"}, args...)} }

func doneOnly(s leaseStep) leaseStep {
	s.doneOnly = true
	return s
}

func fileStep(file string, args ...string) leaseStep {
	s := step(args...)
	s.file = file
	return s
}

// deltaCases: the host_id lease cycle and its errors.
func deltaCases(kind string, sector int) []leaseCase {
	areas := []leaseArea{{0, false}, {1 << 20, true}, {2 << 20, true}}
	mk := func(name string, steps ...leaseStep) leaseCase {
		return leaseCase{name: kind + "/" + name, kind: kind, size: 4 << 20, image: lsResImage(sector), areas: areas, sector: sector, steps: steps}
	}
	sizes := []string{"-Z", fmt.Sprint(sector), "-A", "1M"}
	cs := []leaseCase{
		mk("delta_cycle",
			step("acquire_id", "-s", ls("1"), "-o", "1", "-e", "hostA"),
			step("read_leader", "-s", ls("1")),
			step("renew_id", "-s", ls("1"), "-o", "1"),
			step("renew_id", "-s", ls("1"), "-o", "3"), // io_timeout changes
			step("release_id", "-s", ls("1"), "-o", "1"),
			step("release_id", "-s", ls("1"), "-o", "1"), // released again
			step("renew_id", "-s", ls("1"), "-o", "1"),   // a released lease is renewed
			step("release_id", "-s", ls("1")),
			step(append([]string{"acquire_id", "-s", ls("1"), "-o", "1", "-e", "hostB"}, sizes...)...),
			step("acquire_id", "-s", ls("1"), "-o", "1", "-e", "hostB"), // fast reacquire
			step("dump", "PATH"),
		),
		mk("delta_errors",
			step("acquire_id", "-s", "LX:1:PATH:0", "-o", "1"),
			step("acquire_id", "-s", ls("0"), "-o", "1"),
			step("acquire_id", "-s", "LS:0:/nonexistent/x:0", "-o", "1"),
			step("acquire_id", "-s", "LS:1:/nonexistent/x:0", "-o", "1"),
			step("acquire_id", "-s", "LS", "-o", "1"),
			step("acquire_id", "-s", "LS:2001:PATH:0", "-o", "1"),
			step("acquire_id", "-s", "LS:1:PATH:3145728", "-o", "1"),
			step("acquire_id", "-s", "LS:1:PATH:4194304", "-o", "1"),
			step("acquire_id", "-s", "LS:1:PATH:1048576", "-o", "1"), // a resource lease there
			step("acquire_id", "-o", "1"),
			step("renew_id", "-s", ls("2")), // never acquired
			step("release_id", "-s", ls("2")),
			step("renew_id", "-s", "LX:2:PATH:0"),
			step("release_id", "-s", "LX:2:PATH:0"),
			step("renew_id", "-s", "LS:1:PATH:4194304"),
			step("release_id", "-s", "LS:0:PATH:0"),
			step("renew_id", "-s", "LS:1:/nonexistent/x:0"),
			step("release_id", "-s", "LS:1:PATH:1"),
		),
	}
	if kind == "file" {
		cs = append(cs, mk("generated_name",
			step("acquire_id", "-s", ls("2"), "-o", "1"),
			step("release_id", "-s", ls("2")),
		))
		cs[len(cs)-1].randomName = true
		// The wrong sector size on a 512 lockspace: 4096-byte I/O at
		// host_id 2's 4K slot.
		cs = append(cs, mk("delta_Z4096_on_512",
			step("release_id", "-s", ls("2"), "-Z", "4096", "-A", "1M"),
			step("renew_id", "-s", ls("2"), "-Z", "4096", "-A", "1M"),
			step("acquire_id", "-s", ls("2"), "-o", "1", "-e", "h", "-Z", "4096", "-A", "1M"),
		))
	}
	return cs
}

// misplacedCase: host_id 2's slot holds a record naming host_id 1 (as
// acquire_id at the wrong offset leaves it). sanlock renews for the host_id
// the record names, if that slot matches; release_id writes the record into
// host_id 1's slot, which we refuse.
func misplacedCase(sector int) leaseCase {
	image := func(t *testing.T) []byte {
		b := lsResImage(sector)(t)
		for i, name := range []string{"AAA", "BBB"} {
			l := leaderAt(t, b, int64(i*sector))
			l.OwnerID, l.OwnerGeneration, l.Timestamp = 1, uint64(2-i), 500
			l.ResourceName = diskfmt.MustName(name)
			putLeader(b, int64(i*sector), sector, l)
		}
		// host_id 3's slot: an exact copy of host_id 1's record
		copy(b[2*sector:3*sector], b[:sector])
		return b
	}
	return leaseCase{name: "file/misplaced", kind: "file", size: 4 << 20, image: image, sector: sector,
		areas: []leaseArea{{0, false}},
		steps: []leaseStep{
			step("renew_id", "-s", ls("2"), "-o", "1"), // slot 1 differs: -260
			step("renew_id", "-s", ls("3"), "-o", "1"), // same record: slot 1 renewed
			{args: []string{"direct", "release_id", "-s", ls("2")}, diverge: "sanlock writes host_id 2's record into host_id 1's slot"},
			step("release_id", "-s", ls("1")),
		}}
}

// paxosCases: direct acquire/release and their errors.
func paxosCases(kind string, sector int) []leaseCase {
	areas := []leaseArea{{0, false}, {1 << 20, true}, {2 << 20, true}}
	mk := func(name string, steps ...leaseStep) leaseCase {
		return leaseCase{name: kind + "/" + name, kind: kind, size: 4 << 20, image: lsResImage(sector), areas: areas, sector: sector, steps: steps}
	}
	// a leader with writer 0, owner 0/0 and a timestamp: the only kind
	// direct release rewrites (it runs as host_id 0, generation 0)
	over2000 := step("acquire", "-r", res("R"), "-i", "2001", "-g", "1")
	if sector == 4096 {
		over2000.diverge = "sanlock crashes on a host_id above the 4K lease's 250 hosts"
	}
	writer0 := "write_id 0\nowner_id 0\nowner_generation 0\ntimestamp 5\n"
	cs := []leaseCase{
		mk("paxos_cycle",
			step("acquire", "-r", res("R"), "-i", "1", "-g", "1"),
			step("acquire", "-r", res("R"), "-i", "1", "-g", "1"),       // already ours
			step("acquire", "-r", res("R"), "-i", "1", "-g", "2"),       // old generation of ours
			step("acquire", "-r", res("R"), "-i", "2", "-g", "1"),       // owned by another host: -241
			step("acquire", "-r", res("R"), "-i", "1", "-g", "1"),       // newer generation owns it: -241
			step("release", "-r", res("R"), "-i", "1", "-g", "2"),       // writer is host 1: nothing written
			step("acquire", "-r", res("R")+":SH", "-i", "1", "-g", "2"), // SH, lver and -n are not used
			step("acquire", "-r", res("R")+":7", "-i", "1", "-g", "2", "-n", "10"),
			over2000, // -228
			step("read_leader", "-r", res("R")),
			fileStep(writer0, "write_leader", "-r", res("R"), "-F", "FILE"),
			step("release", "-r", res("R")),
			step("release", "-r", res("R")), // free: -251
			step("acquire", "-r", res("R"), "-i", "2", "-g", "3", "-o", "1"),
			step("acquire", "-r", res2("R2"), "-i", "3", "-g", "1", "-Z", fmt.Sprint(sector), "-A", "1M"),
			step("dump", "PATH", "-f", "2"),
		),
		mk("paxos_errors",
			step("acquire", "-r", "LX:R:PATH:1048576", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:RX:PATH:1048576", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:R:/nonexistent/x:0", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:R:PATH:3145728", "-i", "1", "-g", "1"), // zeros
			step("acquire", "-r", "LS:R:PATH:0", "-i", "1", "-g", "1"),       // a lockspace
			step("acquire", "-r", "LS:R:PATH:1048577", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:R:PATH:4194304", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:R", "-i", "1", "-g", "1"),
			step("release", "-r", "LX:R:PATH:1048576"),
			step("release", "-r", "LS:RX:PATH:1048576"),
			step("release", "-r", "LS:R:/nonexistent/x:0"),
			step("release", "-r", "LS:R:PATH:3145728"),
			step("release", "-r", "LS:R:PATH:0"),
			step("release", "-r", "LS:R:PATH:1048577"),
			step("release", "-r", "LS:R:PATH:4194304"),
			step("release", "-r", "LS:R"),
			step("release", "-r", res("R")), // never acquired: -251
			leaseStep{args: []string{"direct", "acquire", "-i", "1", "-g", "1"}, diverge: "sanlock crashes without -r"},
			leaseStep{args: []string{"direct", "release"}, diverge: "sanlock crashes without -r"},
			leaseStep{args: []string{"direct", "acquire", "-r", "LS", "-i", "1", "-g", "1"}, diverge: "sanlock crashes on a bad -r"},
			leaseStep{args: []string{"direct", "acquire", "-r", res("R"), "-i", "0", "-g", "0"}, diverge: "sanlock runs the ballot as host_id 0 over the request record"},
		),
	}
	if kind == "file" {
		cs = append(cs, mk("paxos_Z4096_on_512",
			step("acquire", "-r", res("R"), "-i", "1", "-g", "1", "-Z", "4096", "-A", "1M"), // -214
			step("release", "-r", res("R"), "-Z", "4096", "-A", "1M"),
		))
		// two disks: R at 1M on both (acquire and release work), then R2's
		// area on the second disk (leaders differ)
		two := mk("two_disks",
			step("acquire", "-r", "LS:R:PATH:1048576:PATH2:1048576", "-i", "1", "-g", "1"),
			step("acquire", "-r", "LS:R:PATH:1048576:PATH2:2097152", "-i", "2", "-g", "1"), // -222
			step("release", "-r", "LS:R:PATH:1048576:PATH2:2097152"),                       // -220
			fileStep(writer0, "write_leader", "-r", "LS:R:PATH2:1048576", "-F", "FILE"),
			step("release", "-r", "LS:R:PATH:1048576:PATH2:1048576"), // leaders differ: -222
			fileStep(writer0, "write_leader", "-r", "LS:R:PATH:1048576", "-F", "FILE"),
			step("release", "-r", "LS:R:PATH:1048576:PATH2:1048576"),
		)
		two.disks = 2
		cs = append(cs, two)
	}
	return cs
}

// writeLeaderCases: write_leader's parsing, checksum handling and sizes.
func writeLeaderCases(kind string, sector int) []leaseCase {
	areas := []leaseArea{{0, false}, {1 << 20, true}, {2 << 20, true}}
	mk := func(name string, steps ...leaseStep) leaseCase {
		return leaseCase{name: kind + "/write_leader_" + name, kind: kind, size: 4 << 20, image: lsResImage(sector), areas: areas, sector: sector, steps: steps}
	}
	long := strings.Repeat("x", 300)
	fields := strings.Join([]string{
		"owner_id -1", "owner_generation 12abc", "lver 3 extra words", "timestamp \t 44", "num_hosts +5",
		"max_hosts 0x10", "io_timeout 70000", "flags zz", "version 0x1234567890", "write_id 007", "extra1 9",
		"write_generation 18446744073709551617", "space_name " + strings.Repeat("S", 60),
		"resource_name " + strings.Repeat("R", 47) + `\:x`, "owner_id", "#comment line", long + " 5", "",
		"  spaced   7  ", "owner_generation abc", "magic 0x", "checksum 0x1", "extra3 -5",
	}, "\n") + "\nwrite_timestamp 8"
	hex := "flags 0x-1\nversion 1\nmagic 0X6152010\nchecksum 0x0x20\n"
	delta := func(f string, args ...string) leaseStep {
		s := fileStep(f, args...)
		s.realBadSum = true
		return s
	}
	// zeros at 3M: a leader that is only a sector size, for host_id 2
	zeroArea := delta(fmt.Sprintf("sector_size %d\n", sector), "write_leader", "-s", "LS:2:PATH:3145728", "-F", "FILE")
	zeroArea.sumAt = 3<<20 + int64(sector)
	cs := []leaseCase{
		mk("resource",
			fileStep(fields, "write_leader", "-r", res("R"), "-F", "FILE"),
			step("read_leader", "-r", res("R")),
			fileStep(hex, "write_leader", "-r", res("R"), "-F", "FILE", "-f", "1"),
			fileStep("owner_id 4\n", "write_leader", "-r", "LX:RX:PATH:1048576", "-F", "FILE"), // names not checked
			fileStep("owner_id 4\n", "write_leader", "-r", res("R"), "-F", "FILE", "-Z", fmt.Sprint(sector), "-A", "1M"),
			fileStep("sector_size 1024\n", "write_leader", "-r", res2("R2"), "-F", "FILE"),
			fileStep("sector_size 0\n", "write_leader", "-r", res2("R2"), "-F", "FILE"),
			fileStep("owner_id 3\n", "write_leader", "-r", "LS:R:PATH:3145728", "-F", "FILE"), // zeros: sector_size 0
			fileStep("sector_size 4096\nowner_id 3\n", "write_leader", "-r", "LS:R:PATH:3145728", "-F", "FILE"),
			fileStep("owner_id 3\n", "write_leader", "-r", "LS:R:PATH:0", "-F", "FILE"), // the delta lease of host 1
			fileStep("owner_id 3\n", "write_leader", "-r", "LS:R:/nonexistent/x:0", "-F", "FILE"),
			// unaligned: the real binary edits uninitialised memory
			doneOnly(fileStep("owner_id 3\n", "write_leader", "-r", "LS:R:PATH:1048577", "-F", "FILE")),
			fileStep("owner_id 3\n", "write_leader", "-r", "LS:R", "-F", "FILE"),
			fileStep("owner_id 3\n", "write_leader", "-F", "FILE"),
			step("write_leader", "-r", res("R")),
			step("write_leader", "-r", res("R"), "-F", "/nonexistent/file"),
			step("dump", "PATH", "-f", "2"),
		),
		mk("delta",
			delta(fields, "write_leader", "-s", ls("1"), "-F", "FILE"),
			delta("owner_id 4\nio_timeout 300\n", "write_leader", "-s", ls("2"), "-F", "FILE", "-f", "1"),
			delta("owner_id 5\n", "write_leader", "-s", "LX:3:PATH:0", "-F", "FILE"),
			delta("owner_id 5\n", "write_leader", "-s", ls("4"), "-F", "FILE", "-Z", fmt.Sprint(sector), "-A", "1M"),
			delta("owner_id 6\n", "write_leader", "-s", ls("5"), "-r", res("R"), "-F", "FILE"), // -s wins
			delta("owner_id 6\n", "write_leader", "-s", ls("0"), "-F", "FILE"),
			delta("owner_id 6\n", "write_leader", "-s", "LS:0:/nonexistent/x:0", "-F", "FILE"),
			delta("owner_id 6\n", "write_leader", "-s", "LS:1:/nonexistent/x:0", "-F", "FILE"),
			delta("owner_id 6\n", "write_leader", "-s", "LS:1:PATH:3145728", "-F", "FILE"), // zeros
			zeroArea,
			delta("owner_id 6\n", "write_leader", "-s", "LS:1:PATH:4194304", "-F", "FILE"),
			delta("owner_id 7\n", "write_leader", "-s", "LS:1:PATH:1048576", "-F", "FILE"), // a paxos leader there
			delta("owner_id 7\n", "write_leader", "-s", "LS:2049:PATH:0", "-F", "FILE"),
		),
	}
	if kind == "file" {
		cs = append(cs, mk("sizes",
			fileStep("sector_size 4096\n", "write_leader", "-r", res("R"), "-F", "FILE"), // 4096-byte write
			delta("sector_size 4096\n", "write_leader", "-s", ls("2"), "-F", "FILE"),
			delta("owner_id 9\n", "write_leader", "-s", ls("2"), "-F", "FILE", "-Z", "4096", "-A", "1M"),
			fileStep("owner_id 9\n", "write_leader", "-r", res2("R2"), "-F", "FILE", "-Z", "4096", "-A", "1M"),
			// the leader at the lockspace offset has an unusable sector size
			delta("sector_size 1024\n", "write_leader", "-r", "LS:R:PATH:0", "-F", "FILE"),
			delta("owner_id 9\n", "write_leader", "-s", ls("3"), "-F", "FILE"),
			delta("sector_size 512\n", "write_leader", "-s", ls("3"), "-F", "FILE"),
		))
		// -r at the end of the device: the real binary edits uninitialised
		// memory; only the result is compared.
		eof := fileStep("owner_id 3\n", "write_leader", "-r", "LS:R:PATH:4194304", "-F", "FILE")
		eof.doneOnly = true
		cs[len(cs)-1].steps = append(cs[len(cs)-1].steps, eof)
	}
	return cs
}

func TestInteropDirectLease(t *testing.T) {
	ours := interop(t)
	var cs []leaseCase
	for _, k := range kinds {
		cs = append(cs, deltaCases(k.name, k.sector)...)
		cs = append(cs, paxosCases(k.name, k.sector)...)
		cs = append(cs, writeLeaderCases(k.name, k.sector)...)
	}
	cs = append(cs, misplacedCase(512))
	concurrent(t, parallelism, cs, func(c leaseCase) string { return c.name }, func(t *testing.T, c leaseCase) {
		runLeaseCase(t, ours, c)
	})
}
