package interop

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testenv"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// TestManyLeasesOneFile: one client
// holds 10,000 leases on one disk under NOFILE 1024. The daemon opens the
// disk once for all of them (descriptors grow with disks, not leases), and
// a held lease costs a few KiB of heap, not a copy of its area.
//
// To stay fast, the leases have num_hosts 8 and lie 8 KiB apart (a lease
// only uses its first 10 sectors then; the 1 MiB first read of an acquire
// covers its neighbours' leaders, which it ignores), on a loop device over
// a tmpfs file, so no I/O waits for a real disk.
func TestManyLeasesOneFile(t *testing.T) {
	const (
		n      = 10000
		stride = 8 << 10
		base   = 1 << 20
	)
	if testing.Short() {
		t.Skip("10,000 acquires")
	}
	testenv.NeedRoot(t, "loop devices")
	g := diskfmt.Geometry{SectorSize: 512, AlignSize: diskfmt.Align1M, MaxHosts: 2000}
	img := make([]byte, base+n*stride+diskfmt.Align1M)
	area, commit, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "LS", IOTimeout: 1})
	require.NoError(t, err)
	copy(img, area)
	copy(img, commit)
	name := func(i int) string { return fmt.Sprintf("R%05d", i) }
	for i := range n {
		a, err := diskfmt.InitPaxosArea(diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: name(i), NumHosts: 8})
		require.NoError(t, err)
		copy(img[base+i*stride:], a[:2*g.SectorSize])
	}
	backing, err := os.CreateTemp("/dev/shm", "gs-manyleases-")
	require.NoError(t, err)
	t.Cleanup(func() { os.Remove(backing.Name()) })
	_, err = backing.Write(img)
	require.NoError(t, err)
	require.NoError(t, backing.Close())
	img = nil
	disk := testdisk.Loop(t, backing.Name(), 512)

	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: min(1024, old.Max), Max: old.Max}))
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })

	td := startDaemon(t, nil)
	td.cl.Timeout = 30 * time.Second
	require.NoError(t, td.cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: disk}}, 0, 1))
	res := td.srv.Manager().Resources

	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()
	batch := func(from int) []wire.Resource {
		var rs []wire.Resource
		for i := from; i < min(from+wire.MaxResources, n); i++ {
			rs = append(rs, wire.Resource{LockspaceName: "LS", Name: name(i),
				Disks: []wire.Disk{{Path: disk, Offset: uint64(base + i*stride)}}})
		}
		return rs
	}
	// A first batch, so what every held lease shares is in the baseline.
	require.NoError(t, reg.Acquire(context.Background(), batch(0), 0, nil))
	fds0 := countFDs(t)
	heap0 := heapInuse()
	for i := wire.MaxResources; i < n; i += wire.MaxResources {
		require.NoError(t, reg.Acquire(context.Background(), batch(i), 0, nil), "acquire %d", i)
	}
	fds1 := countFDs(t)
	heap1 := heapInuse()
	require.Equal(t, n, res.HeldCount())
	perLease := float64(heap1-heap0) / float64(n-wire.MaxResources)
	t.Logf("%d leases held: descriptors %d -> %d, disks open %d; heap in use %.1f -> %.1f MiB, %.0f bytes per held lease",
		n, fds0, fds1, res.OpenDisks(), float64(heap0)/(1<<20), float64(heap1)/(1<<20), perLease)
	require.Equal(t, 1, res.OpenDisks(), "one open for one disk")
	require.LessOrEqual(t, fds1-fds0, 8, "descriptors grew with leases")
	require.LessOrEqual(t, fds1, 64+fds0/2, "descriptors open")
	require.LessOrEqual(t, perLease, 8192.0, "heap per held lease")

	// The client's exit releases everything and closes the disk.
	require.NoError(t, reg.Close())
	require.Eventually(t, func() bool { return res.OpenDisks() == 0 }, 60*time.Second, 50*time.Millisecond)
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
