package interop

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
)

// TestCClientLockspaceDifferential drives a joined lockspace with the real
// 3.8.5 `sanlock client` tool, once against the real daemon and once against
// ours, and compares every line and exit status: add/inq/rem_lockspace,
// gets (-h 1), host_status, renewal and status. Each daemon has its own
// lease file; paths, timestamps and timings are normalised.
func TestCClientLockspaceDifferential(t *testing.T) {
	needRealSanlock(t)
	realDir := testutil.ShortTempDir(t)
	realDaemon(t, realDir, "-e", "hostX")
	td, _ := startLS(t, "hostX", manager.Setup{})

	type side struct{ name, dir, path string }
	sides := []side{
		{"sanlock", realDir, testutil.LeaseFile(t, 1<<20)},
		{"gosanlock", td.dir, testutil.LeaseFile(t, 1<<20)},
	}
	for _, s := range sides {
		out, err := exec.Command(realSanlock, "direct", "init", "-s", "LS:0:"+s.path+":0", "-o", "1").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}

	digits := regexp.MustCompile(`(timestamp[ =]|_ms=)\d+`)
	norm := func(s side, out string) string {
		out = strings.ReplaceAll(out, s.path, "PATH")
		return digits.ReplaceAllString(out, "${1}N")
	}
	steps := [][]string{
		{"client", "add_lockspace", "-o", "1", "-s", "LS:1:PATH:0"},
		{"client", "inq_lockspace", "-s", "LS:1:PATH:0"},
		{"client", "add_lockspace", "-o", "1", "-s", "LS:1:PATH:0"}, // again: -17
		{"client", "add_lockspace", "-o", "1", "-s", "LS:2:PATH:0"}, // other host_id: -22
		{"client", "gets"},
		{"wait"}, // both daemons check the other hosts once a second
		{"client", "gets", "-h", "1"},
		{"client", "host_status", "-s", "LS"},
		{"client", "host_status", "-s", "NOPE"},
		{"client", "renewal", "-s", "LS"},
		{"client", "status"},
		{"client", "rem_lockspace", "-s", "LS:1:PATH:0"},
		{"client", "inq_lockspace", "-s", "LS:1:PATH:0"},
		{"client", "gets"},
	}
	for _, step := range steps {
		if step[0] == "wait" {
			time.Sleep(2500 * time.Millisecond)
			continue
		}
		var outs [2]string
		var codes [2]int
		for i, s := range sides {
			args := make([]string, len(step))
			for j, a := range step {
				args[j] = strings.ReplaceAll(a, "PATH", s.path)
			}
			out, code := runClient(t, s.dir, args...)
			outs[i], codes[i] = norm(s, out), code
		}
		what := strings.Join(step, " ")
		t.Logf("%s -> %d %q", what, codes[1], outs[1])
		if step[1] == "renewal" {
			// The number of renewals so far depends on timing: compare
			// the first record's shape.
			first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
			assert.Equal(t, first(outs[0]), first(outs[1]), what)
			assert.NotEmpty(t, outs[1], what)
		} else {
			assert.Equal(t, outs[0], outs[1], what)
		}
		assert.Equal(t, codes[0], codes[1], "exit status of %s", what)
	}
}
