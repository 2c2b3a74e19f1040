package testutil

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/wire"
)

// ResourceFile returns a lease file (LeaseFile) holding lockspace "LS"
// (io_timeout 1) at offset 0 and resources R0..R(nres-1) at 1 MiB, 2 MiB,
// ...: the layout of the resource-cluster tests.
func ResourceFile(t testing.TB, nres int) string {
	t.Helper()
	path := LeaseFile(t, int64(nres+1)<<20)
	dev, err := diskio.OpenFile(path)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, diskfmt.WriteLockspace(ctx, dev, 0, 0, "LS", 1, 0))
	for i := 0; i < nres; i++ {
		g, err := diskfmt.GeometryForWrite(0, dev.SectorSize())
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: dev, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: fmt.Sprintf("R%d", i)}))
	}
	require.NoError(t, dev.Close())
	return path
}

// Resource is resource Ri of a ResourceFile at path, with flags.
func Resource(path string, i int, flags uint32) wire.Resource {
	return wire.Resource{LockspaceName: "LS", Name: fmt.Sprintf("R%d", i), Flags: flags,
		Disks: []wire.Disk{{Path: path, Offset: uint64(i+1) << 20}}}
}

// Joins adds daemons to lockspace "LS" of a ResourceFile, as host ids 1,
// 2, ... in the order of Add, each add_lockspace (io_timeout 1) in its own
// goroutine so that the next daemon starts meanwhile.
type Joins struct {
	t    testing.TB
	path string
	wg   sync.WaitGroup
	ls   []*wire.Lockspace
}

// NewJoins returns Joins for the ResourceFile at path.
func NewJoins(t testing.TB, path string) *Joins { return &Joins{t: t, path: path} }

// Add starts the join of the daemon behind cl as the next host id.
func (j *Joins) Add(cl *client.Client) {
	ls := &wire.Lockspace{Name: "LS", HostID: uint64(len(j.ls) + 1), Disk: wire.Disk{Path: j.path}}
	j.ls = append(j.ls, ls)
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		assert.NoError(j.t, cl.AddLockspace(context.Background(), ls, 0, 1))
	}()
}

// Wait waits for every join, fails the test now if one failed, and returns
// the lockspaces in the order of Add.
func (j *Joins) Wait() []*wire.Lockspace {
	j.t.Helper()
	j.wg.Wait()
	require.False(j.t, j.t.Failed())
	return j.ls
}
