package watchdog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestInt32Result(t *testing.T) {
	require.Equal(t, 60, int32Result(60))
	require.Equal(t, 0, int32Result(0))
	if bigEndian {
		require.Equal(t, 60, int32Result(60<<32))
	}
}

// No watchdog driver exists here; a regular file exercises the error
// paths: the ioctls fail with ENOTTY and writes go to the file.
func TestRegularFileIsNotAWatchdog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dev")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	var d Driver
	require.NoError(t, d.Stat(p))
	require.Error(t, d.Stat(p+"x"))
	wd, err := d.Open(p)
	require.NoError(t, err)
	_, err = wd.GetTimeout()
	require.ErrorIs(t, err, unix.ENOTTY)
	_, err = wd.SetTimeout(60)
	require.ErrorIs(t, err, unix.ENOTTY)
	require.ErrorIs(t, wd.Keepalive(), unix.ENOTTY)
	n, err := wd.Write([]byte("V"))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, wd.Close())
	require.ErrorIs(t, wd.Close(), unix.EBADF)
	b, _ := os.ReadFile(p)
	require.Equal(t, "V", string(b))
}
