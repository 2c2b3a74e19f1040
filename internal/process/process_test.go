package process

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestHostName(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		u, err := NewUUID()
		require.NoError(t, err)
		require.Regexp(t, re, u)
		require.False(t, seen[u])
		seen[u] = true
	}
	h, err := GenerateHostName("vm")
	require.NoError(t, err)
	assert.Len(t, h, 39)
	assert.True(t, strings.HasSuffix(h, ".vm"))
	h, err = GenerateHostName(strings.Repeat("n", 40))
	require.NoError(t, err)
	assert.Len(t, h, 48)
}

// TestGuardOpen: descriptor rule 2 passes an open's result through, and
// turns running out of descriptors into an EMFILE path error after calling
// refused.
func TestGuardOpen(t *testing.T) {
	var refused []string
	open := GuardOpen(func(p string) (string, error) {
		switch p {
		case "full":
			return "", unix.ENFILE
		case "bad":
			return "", unix.ENOENT
		}
		return "dev:" + p, nil
	}, func(p string) { refused = append(refused, p) })
	dev, err := open("a")
	assert.NoError(t, err)
	assert.Equal(t, "dev:a", dev)
	_, err = open("bad")
	assert.ErrorIs(t, err, unix.ENOENT)
	_, err = open("full")
	var pe *fs.PathError
	if assert.ErrorAs(t, err, &pe) {
		assert.Equal(t, "full", pe.Path)
		assert.ErrorIs(t, err, unix.EMFILE)
	}
	assert.Equal(t, []string{"full"}, refused)
}

// TestPidFileHolder: a second LockPidFile on a held pid file fails with
// ErrLocked and names the holder's pid, and CheckPidFile says the same
// without taking the lock or creating the file.
func TestPidFileHolder(t *testing.T) {
	p := t.TempDir() + "/sanlock.pid"
	require.NoError(t, CheckPidFile(p), "no file: free")
	_, err := os.Stat(p)
	require.ErrorIs(t, err, fs.ErrNotExist, "CheckPidFile creates nothing")

	f, err := LockPidFile(p)
	require.NoError(t, err)
	_, err = LockPidFile(p)
	var le *LockfileError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, "lockfile setlk error "+p+": Resource temporarily unavailable", err.Error())
	assert.Equal(t, os.Getpid(), le.Pid)
	assert.Equal(t, fmt.Sprintf("already running (pid %d)", os.Getpid()), le.Running())

	err = CheckPidFile(p)
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, os.Getpid(), le.Pid)

	// Without a pid in the file (an OFD lock has no owner pid either) the
	// path is named instead.
	require.NoError(t, f.Truncate(0))
	err = CheckPidFile(p)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 0, le.Pid)
	assert.Equal(t, "already running ("+p+" is locked)", le.Running())

	require.NoError(t, f.Close())
	require.NoError(t, CheckPidFile(p), "released")
}
