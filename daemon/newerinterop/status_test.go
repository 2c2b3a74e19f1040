package newerinterop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wire"
)

// hostSanlock is the sanlock 3.8.5 of the host.
const hostSanlock = "/usr/sbin/sanlock"

// section is one printed record of `client status -D` or `host_status
// -D`: its kind (the first word of its line: daemon, p, s, r, worker,
// resource_thread; "host" for a host_status line) and its keys in order.
type section struct {
	kind string
	keys []string
}

// sections splits -D output into its records.
func sections(out string) []section {
	var secs []section
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "    "):
			if len(secs) > 0 {
				k, _, _ := strings.Cut(strings.TrimSpace(l), "=")
				secs[len(secs)-1].keys = append(secs[len(secs)-1].keys, k)
			}
		default:
			kind, _, _ := strings.Cut(l, " ")
			if kind != "" && kind[0] >= '0' && kind[0] <= '9' {
				kind = "host"
			}
			secs = append(secs, section{kind: kind})
		}
	}
	return secs
}

// firstKeys returns the keys of the first record of each kind.
func firstKeys(out string) map[string][]string {
	m := map[string][]string{}
	for _, s := range sections(out) {
		if _, ok := m[s.kind]; !ok {
			m[s.kind] = s.keys
		}
	}
	return m
}

// within reports whether old's keys appear in keys in the same order.
func within(old, keys []string) bool {
	i := 0
	for _, k := range keys {
		if i < len(old) && old[i] == k {
			i++
		}
	}
	return i == len(old)
}

// joinAndHold joins lockspace LS of a new ResourceFile as host_id 1
// (io_timeout 1) through the daemon at runDir and holds R0 with a
// registered Go client; it returns the lease file.
func joinAndHold(t *testing.T, runDir string) string {
	t.Helper()
	cl, err := client.Dial(runDir)
	require.NoError(t, err)
	cl.Timeout = 60 * time.Second
	path := testutil.ResourceFile(t, 1)
	require.NoError(t, cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}, 0, 1))
	holder, err := cl.Register(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	require.NoError(t, holder.Acquire(context.Background(), []wire.Resource{testutil.Resource(path, 0, 0)}, 0, nil))
	return path
}

// ourClient runs our sanlock tool against the daemon whose run
// directory (on the host) is runDir.
func ourClient(t *testing.T, runDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testutil.SanlockBinary(t), args...)
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

var digits = regexp.MustCompile(`\d+`)

// TestStatusKeysVsNewer compares the records of `client status -D` and
// `client host_status -D` of our daemon with those of the real 3.9.5 and
// 5.1.1 daemons, each with a joined lockspace and a held lease, all
// printed by the tree's own tool: ours has 5.1.1's keys, in its order, in
// every record (so 3.9.5's and 3.8.5's are among them), and no worker or
// resource thread records (docs/compat.md "Daemon status").
func TestStatusKeysVsNewer(t *testing.T) {
	for _, name := range []string{"trixie", "sid"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := debtree.Get(t, name)
			theirs := tr.StartDaemon(t, "")
			joinAndHold(t, theirs.HostRunDir())
			oursRun := debtree.RunDir(t)
			startOursIn(t, oursRun)
			joinAndHold(t, filepath.Join(oursRun, "sanlock"))
			ours := &debtree.Daemon{Tree: tr, RunDir: oursRun}

			get := func(d *debtree.Daemon, args ...string) string {
				out, err := d.Client(t, args...)
				require.NoError(t, err, "%s", out)
				return out
			}
			want := firstKeys(get(theirs, "client", "status", "-D"))
			got := firstKeys(get(ours, "client", "status", "-D"))
			for k, v := range firstKeys(get(theirs, "client", "host_status", "-s", "LS", "-D")) {
				want[k] = v
			}
			for k, v := range firstKeys(get(ours, "client", "host_status", "-s", "LS", "-D")) {
				got[k] = v
			}
			for _, kind := range []string{"daemon", "p", "s", "r", "host"} {
				require.Contains(t, want, kind)
				require.Contains(t, got, kind)
				if tr.Version == "5.1.1" {
					assert.Equal(t, want[kind], got[kind], "keys of the %s records", kind)
				} else {
					assert.True(t, within(want[kind], got[kind]), "%s keys of %s %v are not among ours %v", kind, tr.Version, want[kind], got[kind])
				}
			}
			assert.Contains(t, want, "worker", "%s sends worker records", tr.Version)
			assert.NotContains(t, got, "worker")
			assert.NotContains(t, got, "resource_thread")
		})
	}
}

// TestCLIsReadOurStatus runs the status actions of the 3.8.5, 3.9.5 and
// 5.1.1 tools against our daemon (joined lockspace, held lease): each
// prints what our own tool prints, and sorting leaves no "-" line (our
// daemon sends no record those tools do not place).
func TestCLIsReadOurStatus(t *testing.T) {
	trixie := debtree.Get(t, "trixie")
	sid := debtree.Get(t, "sid")
	runDir := debtree.RunDir(t)
	startOursIn(t, runDir)
	sock := filepath.Join(runDir, "sanlock")
	path := joinAndHold(t, sock)

	type tool struct {
		name string
		run  func(args ...string) (string, error)
	}
	var tools []tool
	for _, tr := range []*debtree.Tree{trixie, sid} {
		d := &debtree.Daemon{Tree: tr, RunDir: runDir}
		tools = append(tools, tool{tr.Version, func(args ...string) (string, error) { return d.Client(t, args...) }})
	}
	if _, err := os.Stat(hostSanlock); err == nil {
		tools = append(tools, tool{"3.8.5", func(args ...string) (string, error) {
			cmd := exec.Command(hostSanlock, args...)
			cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+sock)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}})
	}
	for _, args := range [][]string{
		{"client", "status"}, {"client", "status", "-D"}, {"client", "status", "-o", "p"},
		{"client", "status", "-o", "s", "-D"}, {"client", "host_status", "-s", "LS", "-D"},
	} {
		mine := ourClient(t, sock, args...)
		if args[1] == "status" {
			assert.Contains(t, mine, "daemon ours\n")
			assert.Contains(t, mine, "\ns LS:1:"+path+":0\n")
			assert.Regexp(t, `\nr LS:R0:`+regexp.QuoteMeta(path)+`:1048576:\d+ p \d+\n`, mine)
		}
		for _, tl := range tools {
			out, err := tl.run(args...)
			require.NoError(t, err, "%s %v: %s", tl.name, args, out)
			// host_status -D with -D also prints debug lines on stderr.
			if args[1] == "host_status" {
				var keep []string
				for _, l := range strings.Split(out, "\n") {
					if !strings.Contains(l, " lockspace LS host_id") {
						keep = append(keep, l)
					}
				}
				out = strings.Join(keep, "\n")
			}
			assert.Equal(t, digits.ReplaceAllString(mine, "N"), digits.ReplaceAllString(out, "N"), "%s tool: %v", tl.name, args)
			assert.NotContains(t, "\n"+out, "\n-\n", "%s tool: %v", tl.name, args)
		}
	}
}

// TestOurCLIReadsNewerStatus runs our tool's status actions against the
// real 3.9.5 and 5.1.1 daemons: it prints what their own tool prints,
// including their worker and resource thread records (-D only; after the
// "-" line when sorted).
func TestOurCLIReadsNewerStatus(t *testing.T) {
	for _, name := range []string{"trixie", "sid"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := debtree.Get(t, name)
			d := tr.StartDaemon(t, "")
			joinAndHold(t, d.HostRunDir())
			for _, args := range [][]string{
				{"client", "status"}, {"client", "status", "-D"}, {"client", "status", "-o", "p"},
				{"client", "status", "-o", "p", "-D"}, {"client", "status", "-o", "s"},
				{"client", "status", "-o", "s", "-D"}, {"client", "host_status", "-s", "LS", "-D"},
			} {
				want, err := d.Client(t, args...)
				require.NoError(t, err, "%s", want)
				if args[1] == "host_status" {
					var keep []string
					for _, l := range strings.Split(want, "\n") {
						if !strings.Contains(l, " lockspace LS host_id") {
							keep = append(keep, l)
						}
					}
					want = strings.Join(keep, "\n")
				}
				got := ourClient(t, d.HostRunDir(), args...)
				assert.Equal(t, digits.ReplaceAllString(want, "N"), digits.ReplaceAllString(got, "N"), "%s: %v", tr.Version, args)
			}
		})
	}
}
