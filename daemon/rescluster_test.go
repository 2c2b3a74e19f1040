package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// resCluster is two in-process daemons (host_ids 1 and 2) joined to one
// io_timeout 1 lockspace "LS" at offset 0 of a lease file, with resources
// R0..R(n-1) at 1 MiB, 2 MiB, ...
type resCluster struct {
	path string
	tds  []*testDaemon
	ls   []*wire.Lockspace
}

func newResCluster(t *testing.T, hosts, nres int, mcfg manager.Config, mods ...func(*Config)) *resCluster {
	t.Helper()
	path := leaseFile(t, int64(nres+1)<<20)
	dev, err := diskfmt.OpenFile(path)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, diskfmt.WriteLockspace(ctx, dev, 0, 0, "LS", 1))
	for i := 0; i < nres; i++ {
		g, err := diskfmt.GeometryForWrite(0, dev.SectorSize())
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: dev, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: fmt.Sprintf("R%d", i)}))
	}
	require.NoError(t, dev.Close())
	rc := &resCluster{path: path}
	var wg sync.WaitGroup
	for i := 0; i < hosts; i++ {
		m := manager.New(mcfg)
		td := startDaemon(t, func(c *Config, d *Deps) {
			c.OurHostName = fmt.Sprintf("host%d", i+1)
			d.Manager = m
			for _, f := range mods {
				f(c)
			}
		})
		td.cl.Timeout = 30 * time.Second
		ls := &wire.Lockspace{Name: "LS", HostID: uint64(i + 1), Disk: wire.Disk{Path: path}}
		rc.tds, rc.ls = append(rc.tds, td), append(rc.ls, ls)
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, td.cl.AddLockspace(ls, 0, 1))
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	return rc
}

func (rc *resCluster) res(i int, flags uint32) wire.Resource {
	return wire.Resource{LockspaceName: "LS", Name: fmt.Sprintf("R%d", i), Flags: flags,
		Disks: []wire.Disk{{Path: rc.path, Offset: uint64(i+1) << 20}}}
}
