package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Error lines name the operation, the lockspace/resource,
// the disk and offset, and the cause as text.

// Fault modes of faultDev.
const (
	devOK   int32 = iota
	devEIO        // every read and write fails with EIO
	devHang       // every read and write blocks until its io_timeout
)

// faultDev wraps a device (or nothing) with a switchable fault. It has no
// ReadBuf, so every read goes through ReadAt.
type faultDev struct {
	dev  diskfmt.Device // nil: every I/O must fail
	mode *atomic.Int32
}

func (d faultDev) io(ctx context.Context, what string, off int64, f func() error) error {
	switch d.mode.Load() {
	case devEIO:
		return fmt.Errorf("%s at %d: %w", what, off, syscall.EIO)
	case devHang:
		<-ctx.Done()
		return fmt.Errorf("%s at %d: %w", what, off, rescode.ErrIOTimeout)
	}
	return f()
}

func (d faultDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	return d.io(ctx, "read", off, func() error { return d.dev.ReadAt(ctx, p, off) })
}

func (d faultDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.io(ctx, "write", off, func() error { return d.dev.WriteAt(ctx, p, off) })
}

func (d faultDev) SectorSize() int { return 512 }

func (d faultDev) Close() error {
	if d.dev == nil {
		return nil
	}
	return d.dev.Close()
}

// logLine waits for the one log line (message and fields, as the line
// format shows them) containing every part of want and returns it; it
// fails the test with the lines seen when none comes.
func logLine(t *testing.T, logs *observer.ObservedLogs, want ...string) string {
	t.Helper()
	var found string
	ok := assert.Eventually(t, func() bool {
		for _, e := range logs.All() {
			all := true
			text := testutil.LogText(e)
			for _, w := range want {
				all = all && strings.Contains(text, w)
			}
			if all {
				found = text
				return true
			}
		}
		return false
	}, 15*time.Second, 20*time.Millisecond, "no log line with %q", want)
	t.Logf("log: %s", found)
	if !ok {
		for _, e := range logs.All() {
			t.Log(testutil.LogText(e))
		}
	}
	return found
}

func TestLogLinesResourceFailures(t *testing.T) {
	t.Parallel()
	eioPath := testutil.LeaseFile(t, 2<<20)
	hungPath := testutil.LeaseFile(t, 2<<20)
	missing := filepath.Join(filepath.Dir(eioPath), "missing")
	eio, hang := &atomic.Int32{}, &atomic.Int32{}
	eio.Store(devEIO)
	hang.Store(devHang)
	rc := newResCluster(t, 1, 1, manager.Setup{Open: func(p string) (diskfmt.Device, error) {
		switch p {
		case eioPath:
			return faultDev{mode: eio}, nil
		case hungPath:
			return faultDev{mode: hang}, nil
		}
		return diskio.OpenFile(p)
	}})
	td := rc.tds[0]
	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()
	acquire := func(name, path string) {
		t.Helper()
		err := reg.Acquire(context.Background(), []wire.Resource{{LockspaceName: "LS", Name: name,
			Disks: []wire.Disk{{Path: path, Offset: 1 << 20}}}}, 0, nil)
		require.Error(t, err, name)
	}

	acquire("RIO", eioPath)
	line := logLine(t, td.logs, "acquire error lockspace=LS resource=RIO")
	for _, want := range []string{eioPath + ":1048576", "input/output error", "SANLK_DBLOCK_READ"} {
		assert.Contains(t, line, want)
	}

	acquire("RMISS", missing)
	line = logLine(t, td.logs, "acquire error: cannot open the disk lockspace=LS resource=RMISS")
	for _, want := range []string{"-2 (ENOENT)", missing + ":1048576"} {
		assert.Contains(t, line, want)
	}
	line = logLine(t, td.logs, "open error disk="+missing)
	assert.Contains(t, line, "no such file or directory")

	acquire("RHUNG", hungPath)
	line = logLine(t, td.logs, "acquire error lockspace=LS resource=RHUNG result=-202")
	for _, want := range []string{hungPath + ":1048576", "I/O timeout after 1 s"} {
		assert.Contains(t, line, want)
	}
	assertNoGoIdioms(t, td.logs)
}

func TestLogLinesLockspaceFailures(t *testing.T) {
	t.Parallel()
	good := testutil.LeaseFile(t, 1<<20)
	mode := &atomic.Int32{}
	open := func(p string) (diskfmt.Device, error) {
		dev, err := diskio.OpenFile(p)
		if err != nil || p != good {
			return dev, err
		}
		return faultDev{dev: dev, mode: mode}, nil
	}
	td, _ := startLS(t, "hostA", manager.Setup{Open: open})
	cl := td.cl
	require.NoError(t, cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: good}}, 0, 1))

	missing := good + ".none"
	bad := &wire.Lockspace{Name: "LSX", HostID: 1, Disk: wire.Disk{Path: missing}}
	require.Error(t, cl.AddLockspace(context.Background(), bad, 0, 1))
	line := logLine(t, td.logs, "add_lockspace fail result=-19 (ENODEV) lockspace=LSX")
	for _, want := range []string{missing + ":0", "no such file or directory"} {
		assert.Contains(t, line, want)
	}

	zero := testutil.LeaseFile(t, 1<<20)
	noLease := &wire.Lockspace{Name: "LSZ", HostID: 1, Disk: wire.Disk{Path: zero}}
	require.Error(t, cl.AddLockspace(context.Background(), noLease, 0, 1))
	line = logLine(t, td.logs, "add_lockspace fail result=-223 (SANLK_LEADER_MAGIC) lockspace=LSZ")
	for _, want := range []string{"delta_acquire of host_id 1 at " + zero + ":0", "Lease does not exist on storage"} {
		assert.Contains(t, line, want)
	}
	// The delta runner's own line, with the lockspace and disk the
	// manager adds.
	line = logLine(t, td.logs, "add_lockspace fail lockspace=LSZ lockspace_disk="+zero+":0 result=-223")
	assert.Contains(t, line, "Lease does not exist on storage")

	// A renewal whose read hangs past io_timeout.
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: good}}
	require.NoError(t, cl.AddLockspace(context.Background(), ls, 0, 1))
	mode.Store(devHang)
	line = logLine(t, td.logs, "renewal error", "result=-202")
	mode.Store(devOK)
	for _, want := range []string{"I/O timeout after 1 s", "delta_renew read LS:1", "lockspace=LS lockspace_disk=" + good + ":0"} {
		assert.Contains(t, line, want)
	}
	require.NoError(t, cl.RemLockspace(context.Background(), ls, 0))
	assertNoGoIdioms(t, td.logs)
}

// assertNoGoIdioms checks that no line shows a nil error or a Go value dump.
func assertNoGoIdioms(t *testing.T, logs *observer.ObservedLogs) {
	t.Helper()
	for _, e := range logs.All() {
		for _, bad := range []string{"<nil>", "%!", "&{", "map[", " true", " false", "=true", "=false"} {
			assert.NotContains(t, testutil.LogText(e), bad)
		}
	}
}
