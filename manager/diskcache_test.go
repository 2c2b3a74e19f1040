package manager

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/testdisk"
)

// TestDiskCache: one open per path whatever the number of users, closed
// with the last one; a failed open is not cached and closes nothing.
func TestDiskCache(t *testing.T) {
	opens, closes := 0, 0
	fail := true
	c := newDiskCache(func(p string) (diskfmt.Device, error) {
		opens++
		if fail {
			var f *diskio.File
			return f, os.ErrNotExist // a typed nil, as diskio.OpenFile returns
		}
		return &countClose{Mem: testdisk.NewMem(1<<20, 512), closes: &closes}, nil
	})
	_, err := c.get("a")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, 0, c.openCount())
	fail = false
	d1, err := c.get("a")
	require.NoError(t, err)
	d2, err := c.get("a")
	require.NoError(t, err)
	d3, err := c.get("b")
	require.NoError(t, err)
	require.Equal(t, 3, opens)
	require.Equal(t, 2, c.openCount())
	require.NoError(t, d1.WriteAt(t.Context(), make([]byte, 512), 0))
	require.NoError(t, d1.Close())
	require.Equal(t, 0, closes)
	require.NoError(t, d2.Close())
	require.NoError(t, d3.Close())
	require.Equal(t, 2, closes)
	require.Equal(t, 0, c.openCount())
}

type countClose struct {
	*testdisk.Mem
	closes *int
}

func (c *countClose) Close() error { *c.closes++; return nil }
