package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testutil"
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

func newResCluster(t testing.TB, hosts, nres int, mcfg manager.Setup, mods ...func(*Config)) *resCluster {
	t.Helper()
	path := testutil.ResourceFile(t, nres)
	rc := &resCluster{path: path}
	joins := testutil.NewJoins(t, path)
	for i := 0; i < hosts; i++ {
		td := startDaemon(t, func(c *Config, d *Deps) {
			c.OurHostName = fmt.Sprintf("host%d", i+1)
			d.Manager = mcfg
			for _, f := range mods {
				f(c)
			}
		})
		td.cl.Timeout = 30 * time.Second
		rc.tds = append(rc.tds, td)
		joins.Add(td.cl)
	}
	rc.ls = joins.Wait()
	return rc
}

func (rc *resCluster) res(i int, flags uint32) wire.Resource {
	return testutil.Resource(rc.path, i, flags)
}
