package proctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wire"
)

// previousRelease is the commit of the previous released build of ours
// (docs/upgrade.md "Upgrading from the previous
// release"). Move it forward at each release.
const previousRelease = "52a545c"

var prevBin struct {
	once sync.Once
	path string
	err  error
}

// previousReleaseBinary builds cmd/sanlock of previousRelease from this
// repository's git history (git archive into a temp dir, go build there
// with the same module and build caches). A missing commit (a shallow
// clone) is a failure with its reason, not a skip: the upgrade path must
// be tested.
func previousReleaseBinary(t *testing.T) string {
	t.Helper()
	prevBin.once.Do(func() {
		prevBin.path, prevBin.err = buildRelease(previousRelease)
	})
	require.NoError(t, prevBin.err)
	return prevBin.path
}

func buildRelease(commit string) (string, error) {
	// safe.directory: as root in a clone owned by another user, git
	// refuses the repository otherwise.
	git := func(args ...string) *exec.Cmd {
		return exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	}
	out, err := git("rev-parse", "--show-toplevel").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("the previous release %s is built from git history, but this is not a git checkout: %v: %s",
			commit, err, out)
	}
	root := strings.TrimSpace(string(out))
	if out, err := git("-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Errorf("commit %s (the previous release) is missing from the repository at %s "+
			"(a shallow clone? fetch the full history): %v: %s", commit, root, err, out)
	}
	dir, err := os.MkdirTemp("", "gsprev")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	tarf := filepath.Join(dir, "src.tar")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	if out, err := git("-C", root, "archive", "-o", tarf, commit).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v: %s", commit, err, out)
	}
	if out, err := exec.Command("tar", "-x", "-f", tarf, "-C", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar -x %s: %v: %s", tarf, err, out)
	}
	bin := filepath.Join(dir, "sanlock")
	// -trimpath: the build cache then keys the packages by content, not by
	// this temp dir, so a second run rebuilds little.
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sanlock")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of %s (the previous release): %v: %s", commit, err, out)
	}
	_ = os.RemoveAll(src)
	_ = os.Remove(tarf)
	return bin, nil
}

// TestReexecUpgradeFromReleaseProcess: the previous released build
// (previousRelease, built from git) runs as the daemon with a joined
// lockspace (io_timeout 1), a registered holder of R0 (EX) and R1 (SH) and
// an orphan R2 (EX, persistent, its holder gone); the current build is
// installed over its binary and SIGUSR1 hands it over. After it the current build serves (the pid
// file names a process running it), the lockspace has the same generation
// and acquire time, the holder is registered on its old connection and
// its inquire answer (lver included) is unchanged, the orphan is listed,
// R0 and R2 cannot be taken by another client, and renewals go on without
// a gap over the renewal interval.
func TestReexecUpgradeFromReleaseProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemonBin(t, previousReleaseBinary(t), nil, "-w", "0")
	newBin := reexecBinary(t)
	f := newLeaseFixture(t, d, lockspaceFile(t, 3), []orphanSpec{{2, 0}})
	res, holder, state, orphaned := f.res, f.holder, f.state, f.orphaned
	registered := func() bool { return d.hasClient(t, os.Getpid()) }
	require.True(t, registered())
	before := d.spaceStatus("LS")

	// The upgrade as a package does it: the current build is installed
	// at the daemon's own path, then the running daemon is told to
	// reexec (SIGUSR1, which every release since the previous one
	// serves: its client command was a different message).
	good, err := os.ReadFile(newBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.bin+".new", good, 0o755))
	require.NoError(t, os.Rename(d.bin+".new", d.bin))
	old := d.pid()
	require.NoError(t, syscall.Kill(old, syscall.SIGUSR1), "the previous release hands over to the current build")
	now := 0
	require.Eventually(t, func() bool {
		now = d.pid() // 0 while the new image rewrites the pid file
		return now != 0 && now != old && gone(old)
	}, 20*time.Second, 5*time.Millisecond)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(now) + "/exe")
	require.NoError(t, err)
	assert.Equal(t, d.bin, exe, "the current build, installed at the daemon's path, serves")

	inq, err := holder.Inquire(context.Background())
	got, n := inq.State, inq.Count
	require.NoError(t, err, "the holder's connection is served by the new image")
	assert.Equal(t, 2, n)
	assert.Equal(t, state, got, "same leases, same lver")
	assert.True(t, registered(), "holder still registered")
	assert.True(t, orphaned(), "orphan R2 still listed")
	after := d.spaceStatus("LS")
	for _, k := range []string{"host_generation", "acquire_last_success", "io_timeout"} {
		assert.Equal(t, before[k], after[k], k)
	}
	other, err := d.cl.Register(context.Background())
	require.NoError(t, err)
	defer other.Close()
	assert.Error(t, other.Acquire(context.Background(), []wire.Resource{res(0, 0)}, 0, nil), "R0 is held")
	assert.Error(t, other.Acquire(context.Background(), []wire.Resource{res(2, 0)}, 0, nil), "R2 is an orphan")
	require.NoError(t, other.Acquire(context.Background(), []wire.Resource{res(1, wire.ResShared)}, 0, nil), "R1 is shared")

	// Renewals go on in the new image, without a gap.
	last := d.renewals("LS")
	require.NotEmpty(t, last)
	require.Eventually(t, func() bool {
		ts := d.renewals("LS")
		return len(ts) > 0 && ts[len(ts)-1] > last[len(last)-1]
	}, 10*time.Second, 100*time.Millisecond)
	ts := d.renewals("LS")
	for i := 1; i < len(ts); i++ {
		assert.LessOrEqual(t, ts[i]-ts[i-1], uint64(3), "renewal gap at %d: %v", i, ts)
	}
	assert.Zero(t, d.failures())
}
