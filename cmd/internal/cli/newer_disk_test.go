package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/debtree"
)

// The on-disk versions of sanlock 3.9.5 and 5.1.1 against ours
// (docs/compat.md "On-disk format versions"): byte-exact init, each side
// reading and dumping the other's areas. The trees come from
// internal/debtree (root; skipped otherwise unless CI=true).

// treeRun runs `sanlock args...` in tr with conf (a host file, "" for
// none) as its /etc/sanlock/sanlock.conf; stdout and the exit code.
func treeRun(t *testing.T, tr *debtree.Tree, conf string, args ...string) (string, int) {
	t.Helper()
	opts := &debtree.Options{}
	if conf == "" {
		conf = filepath.Join(t.TempDir(), "empty.conf")
		require.NoError(t, os.WriteFile(conf, nil, 0o644))
	}
	opts.Binds = []debtree.Bind{{Host: conf, Tree: "/etc/sanlock/sanlock.conf"}}
	cmd := tr.Command(opts, append([]string{"sanlock"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s sanlock %v: %v\n%s", tr.Name, args, err, errb.String())
	}
	return out.String(), rc
}

// oursConf runs our tool in-process with conf as its sanlock.conf.
func oursConf(t *testing.T, conf string, args ...string) (string, int) {
	t.Helper()
	return runMainF(t, func(f *Factory) {
		if conf != "" {
			f.ConfigPath = conf
		}
	}, args...)
}

func writeConf(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sanlock.conf")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return p
}

// newerGeometries are the -Z/-A pairs init takes.
var newerGeometries = []struct{ z, a string }{
	{"512", "1M"}, {"4096", "1M"}, {"4096", "2M"}, {"4096", "4M"}, {"4096", "8M"},
}

func alignBytes(a string) int64 {
	var n int64
	fmt.Sscanf(a, "%dM", &n)
	return n << 20
}

func newLeaseFile(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	require.NoError(t, os.Truncate(p, size))
	return p
}

func sameFiles(t *testing.T, a, b, what string) {
	t.Helper()
	x, err := os.ReadFile(a)
	require.NoError(t, err)
	y, err := os.ReadFile(b)
	require.NoError(t, err)
	if !bytes.Equal(x, y) {
		n, first := 0, -1
		for i := range x {
			if x[i] != y[i] {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		t.Errorf("%s: %d bytes differ, first at %d", what, n, first)
	}
}

// TestNewerInitBytes: our `direct init` writes what 5.1.1 writes for each
// version and geometry (5.1.1 told the old versions by its create_old_*
// keys, we by ours), and the old versions also what 3.9.5 and 3.8.5 write.
func TestNewerInitBytes(t *testing.T) {
	sid := debtree.Get(t, "sid")
	trixie := debtree.Get(t, "trixie")
	dir := leaseDir(t)
	type version struct {
		name       string
		ours, sids string // config lines
		old        bool   // 3.x writes it too
	}
	versions := []version{
		{"delta 3.4 paxos 6.4", "", "create_old_delta_disk_version = 3.4\ncreate_old_paxos_disk_version = 6.4", true},
		{"delta 4.0 paxos 6.4", "create_delta_disk_version = 4.0", "create_old_delta_disk_version = 4.0\ncreate_old_paxos_disk_version = 6.4", false},
		{"delta 5.0 paxos 7.0", "create_delta_disk_version = 5.0\ncreate_paxos_disk_version = 7.0", "", false},
		{"5.x keys in ours", "create_old_delta_disk_version = 3.4\ncreate_old_paxos_disk_version = 6.4\ncreate_delta_disk_version = 5.0", "create_old_delta_disk_version = 3.4\ncreate_old_paxos_disk_version = 6.4", true},
	}
	for _, v := range versions {
		for _, g := range newerGeometries {
			t.Run(fmt.Sprintf("%s %s/%s", v.name, g.z, g.a), func(t *testing.T) {
				align := alignBytes(g.a)
				size := 2 * align
				oursConfPath := writeConf(t, v.ours)
				sidConfPath := writeConf(t, v.sids)
				init := func(run func(args ...string) (string, int), path string) {
					for _, args := range [][]string{
						{"direct", "init", "-s", "LS:0:" + path + ":0", "-Z", g.z, "-A", g.a},
						{"direct", "init", "-r", fmt.Sprintf("LS:R:%s:%d", path, align), "-Z", g.z, "-A", g.a},
					} {
						out, rc := run(args...)
						require.Equal(t, 0, rc, "%v: %s", args, out)
						require.Equal(t, "init done 0\n", out, "%v", args)
					}
				}
				ours := newLeaseFile(t, dir, "ours", size)
				init(func(args ...string) (string, int) { return oursConf(t, oursConfPath, args...) }, ours)
				theirs := newLeaseFile(t, dir, "sid", size)
				init(func(args ...string) (string, int) { return treeRun(t, sid, sidConfPath, args...) }, theirs)
				sameFiles(t, ours, theirs, "ours vs 5.1.1")
				if !v.old {
					return
				}
				tx := newLeaseFile(t, dir, "trixie", size)
				init(func(args ...string) (string, int) { return treeRun(t, trixie, "", args...) }, tx)
				sameFiles(t, ours, tx, "ours vs 3.9.5")
				if _, err := os.Stat(cSanlock); err == nil {
					c := newLeaseFile(t, dir, "c", size)
					init(func(args ...string) (string, int) { return runC(t, args...) }, c)
					sameFiles(t, tx, c, "3.9.5 vs 3.8.5")
				}
			})
		}
	}
}

// TestNewerReadEachOther: areas of every version, made by 5.1.1 (init and
// init_host with its flag variants) or by us (with the 5.x flag bits set
// as 5.x sets them), read by both: read_leader and dump print the same
// lines and results on both sides.
func TestNewerReadEachOther(t *testing.T) {
	sid := debtree.Get(t, "sid")
	dir := leaseDir(t)
	conf50 := writeConf(t, "create_delta_disk_version = 5.0", "create_paxos_disk_version = 7.0")
	conf40 := writeConf(t, "create_delta_disk_version = 4.0")
	sidOld := writeConf(t, "create_old_delta_disk_version = 3.4", "create_old_paxos_disk_version = 6.4")
	sid40 := writeConf(t, "create_old_delta_disk_version = 4.0")

	type area struct {
		name     string
		make     func(t *testing.T, path string, g areaGeo)
		hosts    []int
		oldDelta bool // a 3.4 lockspace: its plain records are dumped as 3.8.5 dumps them
	}
	sidDo := func(t *testing.T, conf string, args ...string) {
		out, rc := treeRun(t, sid, conf, args...)
		require.Equal(t, 0, rc, "5.1.1 %v: %s", args, out)
	}
	oursDo := func(t *testing.T, conf string, args ...string) {
		out, rc := oursConf(t, conf, args...)
		require.Equal(t, 0, rc, "ours %v: %s", args, out)
	}
	// sid5x: a 5.x lockspace and resource, host slots written by 5.1.1's
	// init_host: 1 plain (-C 0), 2 NO_TIMEOUT (5.1.1 refuses it, -22, when
	// it writes 3.4), 3 with its default CAW (set only when it writes 5.0).
	// initConf is the configuration of the init of the areas, conf that of
	// init_host.
	sidHostsIn := func(initConf, conf string, noTimeout bool) func(t *testing.T, path string, g areaGeo) {
		return func(t *testing.T, path string, g areaGeo) {
			sz := []string{"-Z", g.z, "-A", g.a}
			sidDo(t, initConf, append([]string{"direct", "init", "-s", "LS:0:" + path + ":0"}, sz...)...)
			sidDo(t, initConf, append([]string{"direct", "init", "-r", g.res(path)}, sz...)...)
			sidDo(t, conf, append([]string{"direct", "init_host", "-s", "LS:1:" + path + ":0", "-g", "5", "-t", "100", "-C", "0"}, sz...)...)
			nt := append([]string{"direct", "init_host", "-s", "LS:2:" + path + ":0", "-g", "7", "-t", "200", "-N", "1", "-C", "0"}, sz...)
			if noTimeout {
				sidDo(t, conf, nt...)
			} else {
				out, _ := treeRun(t, sid, conf, nt...)
				require.Equal(t, "init done -22\n", out)
			}
			sidDo(t, conf, append([]string{"direct", "init_host", "-s", "LS:3:" + path + ":0", "-g", "9", "-t", "300"}, sz...)...)
		}
	}
	sidHosts := func(conf string, noTimeout bool) func(t *testing.T, path string, g areaGeo) {
		return sidHostsIn(conf, conf, noTimeout)
	}
	// oursFlags: our init of that version, then host records and a
	// resource leader with the 5.x flag bits written by our encoder.
	oursFlags := func(conf string) func(t *testing.T, path string, g areaGeo) {
		return func(t *testing.T, path string, g areaGeo) {
			sz := []string{"-Z", g.z, "-A", g.a}
			oursDo(t, conf, append([]string{"direct", "init", "-s", "LS:0:" + path + ":0"}, sz...)...)
			oursDo(t, conf, append([]string{"direct", "init", "-r", g.res(path)}, sz...)...)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			edit := func(off int64, fn func(*diskfmt.Leader)) {
				b := make([]byte, g.ss)
				_, err := f.ReadAt(b, off)
				require.NoError(t, err)
				l, err := diskfmt.DecodeLeader(b)
				require.NoError(t, err)
				fn(&l)
				l.Seal(b)
				_, err = f.WriteAt(b, off)
				require.NoError(t, err)
			}
			for h, flags := range map[int]uint32{1: 0, 2: diskfmt.LeaderNoTimeout, 3: diskfmt.LeaderDeadExt} {
				edit(int64(h-1)*int64(g.ss), func(l *diskfmt.Leader) {
					l.OwnerID, l.OwnerGeneration, l.Timestamp = uint64(h), uint64(h+4), uint64(100*h)
					l.ResourceName = diskfmt.MustName(fmt.Sprintf("host%d", h))
					l.Flags |= flags
					if flags == diskfmt.LeaderDeadExt {
						l.Unused1 = diskfmt.DeadExtMark
					}
				})
			}
			edit(g.align, func(l *diskfmt.Leader) {
				l.OwnerID, l.OwnerGeneration, l.Lver, l.Timestamp = 2, 3, 4, 500
				l.Flags |= diskfmt.LeaderNoTimeout | diskfmt.LeaderShortHold
			})
		}
	}
	areas := []area{
		{"5.1.1 delta 5.0 paxos 7.0", sidHosts("", true), []int{1, 2, 3, 4}, false},
		{"5.1.1 delta 4.0", sidHosts(sid40, true), []int{1, 2, 3}, false},
		{"5.1.1 delta 3.4 paxos 6.4", sidHosts(sidOld, false), []int{1, 2, 3}, true},
		// 3.4 lockspace and 6.4 resource, slots rewritten by 5.1.1's
		// init_host in its own version (5.0).
		{"5.1.1 5.0 slots in a 3.4 lockspace", sidHostsIn(sidOld, "", true), []int{1, 2, 3, 4}, false},
		{"ours delta 5.0 paxos 7.0", oursFlags(conf50), []int{1, 2, 3, 4}, false},
		{"ours delta 4.0", oursFlags(conf40), []int{1, 2, 3}, false},
		{"ours delta 3.4 paxos 6.4 with 5.x flags", oursFlags(""), []int{1, 2, 3}, true},
	}
	for _, g := range []areaGeo{{"512", "1M", 512, 1 << 20}, {"4096", "1M", 4096, 1 << 20}, {"4096", "8M", 4096, 8 << 20}} {
		for _, a := range areas {
			t.Run(fmt.Sprintf("%s %s/%s", a.name, g.z, g.a), func(t *testing.T) {
				testReadEachOther(t, sid, dir, g, a.make, a.hosts, a.oldDelta)
			})
		}
	}
}

// areaGeo is a sector/align pair of TestNewerReadEachOther: the lockspace
// at 0, the resource one align size later.
type areaGeo struct {
	z, a  string
	ss    int
	align int64
}

func (g areaGeo) res(path string) string { return fmt.Sprintf("LS:R:%s:%d", path, g.align) }

// testReadEachOther makes an area with mk and compares what 5.1.1 and our
// tool print for it: dump (-f 0, 1, 2) and read_leader of the resource
// and of the given host slots.
func testReadEachOther(t *testing.T, sid *debtree.Tree, dir string, g areaGeo, mk func(*testing.T, string, areaGeo), hosts []int, oldDelta bool) {
	path := newLeaseFile(t, dir, "area", 2*g.align)
	mk(t, path, g)
	cmds := [][]string{
		{"direct", "dump", path},
		{"direct", "dump", path, "-f", "1"},
		{"direct", "dump", fmt.Sprintf("%s:0:%d", path, 2*g.align), "-f", "2"},
		{"direct", "read_leader", "-r", g.res(path)},
	}
	for _, h := range hosts {
		cmds = append(cmds, []string{"direct", "read_leader", "-s", fmt.Sprintf("LS:%d:%s:0", h, path)})
	}
	for _, args := range cmds {
		theirs, trc := treeRun(t, sid, "", args...)
		ours, orc := oursConf(t, "", args...)
		if strings.Contains(strings.Join(args, " "), "read_leader") && !newFormatOutput(theirs) {
			// A leader 3.8.5 can read is printed as 3.8.5 prints
			// it: the 5.x flag names and unused1 line are not ours.
			theirs = as385(theirs)
		}
		if args[1] == "dump" {
			// The header, the resource and the host slots at least.
			assert.GreaterOrEqual(t, strings.Count(theirs, "\n"), 1+1+len(hosts)-1, "%v: %s", args, theirs)
			if oldDelta {
				theirs = dumpAs385(theirs)
			}
		}
		assert.Equal(t, trc, orc, "%v exit", args)
		assert.Equal(t, theirs, ours, "%v", args)
	}
}

// newFormatOutput reports whether a 5.1.1 read_leader output shows a
// leader in a format only 5.x writes (the lines we print in 5.x's form).
func newFormatOutput(s string) bool {
	var l diskfmt.Leader
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, " ")
		f, _, _ := strings.Cut(v, " ")
		var n uint64
		fmt.Sscanf(f, "0x%x", &n)
		switch k {
		case "magic":
			l.Magic = uint32(n)
		case "version":
			l.Version = uint32(n)
		case "flags":
			l.Flags = uint32(n)
		}
	}
	return l.NewFormat()
}

// dumpDeltaFlags matches a delta lease line of 5.1.1's dump: the fields,
// the flags, then (-f 1) the bitmap's host_ids.
var dumpDeltaFlags = regexp.MustCompile(`(?m)^(\d{8} .{36} .{48} \d{10} \d{4} \d{4}) 0x([0-9a-f]{8})(.*)$`)

// dumpAs385 drops the flags of delta lines that have none of the 5.x bits
// (records of a 3.4 lockspace 3.8.5 can read, which we dump as it does).
func dumpAs385(s string) string {
	return dumpDeltaFlags.ReplaceAllStringFunc(s, func(line string) string {
		m := dumpDeltaFlags.FindStringSubmatch(line)
		var f uint32
		fmt.Sscanf(m[2], "%x", &f)
		if f&diskfmt.LeaderNewFlags != 0 {
			return line
		}
		return m[1] + m[3]
	})
}

// as385 turns 5.1.1's read_leader lines into 3.8.5's: no flag names, no
// unused1 line.
func as385(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(line, "unused1 ") {
			continue
		}
		if strings.HasPrefix(line, "flags ") {
			if i := strings.Index(line, " ["); i >= 0 {
				line = line[:i] + "\n"
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestNewerDirectLeases: our direct acquire_id, acquire, release and
// release_id on areas 5.1.1 made in its format keep the versions (5.1.1
// reads the result), and 3.8.5 refuses those areas (-224): the reason the
// default stays 3.4/6.4 (docs/compat.md "On-disk format versions").
func TestNewerDirectLeases(t *testing.T) {
	sid := debtree.Get(t, "sid")
	dir := leaseDir(t)
	path := newLeaseFile(t, dir, "leases", 2<<20)
	lsArg, resArg := "LS:3:"+path+":0", "LS:R:"+path+":1048576"
	for _, args := range [][]string{{"direct", "init", "-s", "LS:0:" + path + ":0", "-o", "1"}, {"direct", "init", "-r", resArg}} {
		out, rc := treeRun(t, sid, "", args...)
		require.Equal(t, 0, rc, "%v: %s", args, out)
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}
	for _, step := range []struct{ args []string }{
		{[]string{"direct", "acquire_id", "-s", lsArg}},
		{[]string{"direct", "acquire", "-r", resArg, "-i", "3", "-g", "1"}},
	} {
		out, rc := runMain(t, step.args...)
		require.Equal(t, 0, rc, "%v: %s", step.args, out)
	}
	for _, args := range [][]string{
		{"direct", "read_leader", "-s", lsArg},
		{"direct", "read_leader", "-r", resArg},
		{"direct", "dump", path, "-f", "1"},
	} {
		theirs, trc := treeRun(t, sid, "", args...)
		ours, orc := runMain(t, args...)
		assert.Equal(t, 0, trc, "%v: %s", args, theirs)
		assert.Equal(t, trc, orc)
		assert.Equal(t, theirs, ours, "%v", args)
	}
	out, _ := treeRun(t, sid, "", "direct", "read_leader", "-r", resArg)
	assert.Contains(t, out, "owner_id 3\n")
	assert.Contains(t, out, "version 0x70000\n")
	for _, args := range [][]string{{"direct", "release", "-r", resArg, "-i", "3", "-g", "1"}, {"direct", "release_id", "-s", lsArg}} {
		out, rc := runMain(t, args...)
		require.Equal(t, 0, rc, "%v: %s", args, out)
	}
	out, _ = treeRun(t, sid, "", "direct", "read_leader", "-s", lsArg)
	assert.True(t, strings.HasPrefix(out, "read_leader done 0\nmagic 0x12212010\nversion 0x50000\n"), out)
	assert.Contains(t, out, "timestamp 0\n")

	if _, err := os.Stat(cSanlock); err != nil {
		return
	}
	for _, args := range [][]string{{"direct", "read_leader", "-s", lsArg}, {"direct", "read_leader", "-r", resArg}} {
		out, rc := runC(t, args...)
		assert.Equal(t, 1, rc)
		assert.Equal(t, "read_leader done -224", lastLine(strings.SplitN(out, "\n", 2)[0]), "3.8.5 %v", args)
	}
	out, _ = runC(t, "direct", "acquire_id", "-s", lsArg)
	assert.Equal(t, "acquire_id done -224", lastLine(out), "3.8.5 joins no 5.0 lockspace")
}

// TestNewerInitHostSlot: 5.1.1's init_host rewrites a slot of a 3.4
// lockspace in its own version, 5.0. Our acquire_id takes such a slot and
// keeps it 5.0; one that init_host marked CAW (its default) is refused
// with -283, as 5.1.1 refuses to join it on a file.
func TestNewerInitHostSlot(t *testing.T) {
	sid := debtree.Get(t, "sid")
	dir := leaseDir(t)
	path := newLeaseFile(t, dir, "leases", 1<<20)
	out, rc := runMain(t, "direct", "init", "-s", "LS:0:"+path+":0", "-o", "1")
	require.Equal(t, 0, rc, out)
	for _, args := range [][]string{
		{"direct", "init_host", "-s", "LS:2:" + path + ":0", "-g", "3", "-t", "0", "-C", "0", "-o", "1"},
		{"direct", "init_host", "-s", "LS:3:" + path + ":0", "-g", "3", "-t", "0"},
	} {
		out, rc := treeRun(t, sid, "", args...)
		require.Equal(t, 0, rc, "%v: %s", args, out)
	}
	out, _ = runMain(t, "direct", "acquire_id", "-s", "LS:2:"+path+":0")
	assert.Contains(t, out, "acquire_id done 0\n")
	out, _ = treeRun(t, sid, "", "direct", "read_leader", "-s", "LS:2:"+path+":0")
	assert.True(t, strings.HasPrefix(out, "read_leader done 0\nmagic 0x12212010\nversion 0x50000\nflags 0x10 [ ALIGN_1M ]\n"), out)
	assert.Contains(t, out, "owner_generation 4\n")
	out, _ = treeRun(t, sid, "", "direct", "read_leader", "-s", "LS:1:"+path+":0")
	assert.True(t, strings.HasPrefix(out, "read_leader done 0\nmagic 0x12212010\nversion 0x30004\n"), "slot 1 stays 3.4: %s", out)
	before := fileHash(t, path)
	out, _ = runMain(t, "direct", "acquire_id", "-s", "LS:3:"+path+":0")
	assert.Contains(t, out, "acquire_id done -283\n")
	assert.Equal(t, before, fileHash(t, path), "nothing written")
}
