package newerinterop

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wire"
)

// startOursIn starts our sanlock binary as a daemon whose run directory
// is runDir/sanlock, so that a program in a Debian tree given RunDir
// runDir reaches it at the tree's default /run/sanlock. It is killed by
// pid at cleanup; the returned function reads its output so far.
func startOursIn(t *testing.T, runDir string) (*client.Client, func() string) {
	t.Helper()
	dir := filepath.Join(runDir, "sanlock")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	logf, err := os.Create(filepath.Join(runDir, "daemon.out"))
	require.NoError(t, err)
	t.Cleanup(func() { logf.Close() })
	out := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	cmd := exec.Command(testutil.SanlockBinary(t), "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-e", "ours")
	cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	cl, err := client.Dial(dir)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err == nil }, 20*time.Second, 20*time.Millisecond,
		"our daemon: %s", out())
	return cl, out
}

// TestAcquire2AgainstOurs: libsanlock 5.1.1's sanlock_acquire2 (command
// 41, gosanlock's reexec number in earlier releases) against our daemon,
// once for a lease of the joined lockspace and once with every name and
// the path the path of an executable: neither starts anything (the
// executable does not run, the daemon logs no reexec and keeps its pid),
// the second is refused with an error, and the lease a Go client holds
// stays held.
func TestAcquire2AgainstOurs(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	runDir := debtree.RunDir(t)
	cl, out := startOursIn(t, runDir)
	cl.Timeout = 30 * time.Second

	path := testutil.ResourceFile(t, 2)
	require.NoError(t, cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}, 0, 1))
	holder, err := cl.Register(context.Background())
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, holder.Acquire(context.Background(), []wire.Resource{testutil.Resource(path, 0, 0)}, 0, nil))
	inq, err := holder.Inquire(context.Background())
	state := inq.State
	require.NoError(t, err)
	pid := func() string {
		b, _ := os.ReadFile(filepath.Join(runDir, "sanlock", "sanlock.pid"))
		return string(bytes.TrimSpace(b))
	}
	before := pid()
	require.NotEmpty(t, before)

	// An executable whose path fits a lockspace name, under /var/tmp (the
	// same path inside the tree).
	dir, err := os.MkdirTemp("/var/tmp", "gsx")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	exe, ran := filepath.Join(dir, "x"), filepath.Join(dir, "ran")
	require.Less(t, len(exe), wire.NameLen)
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755))

	// acquire2 LS RES PATH OFF RESFLAGS FLAGS PID, each from a process of
	// its own (pid -1 needs a registered connection: the driver's
	// "register" first, on stdin).
	d := tr.StartDriver(t, runDir)
	r := d.Call(t, 10*time.Second, "register")
	require.GreaterOrEqual(t, r.RV, 0, r.Line)
	legit := d.Call(t, 60*time.Second, "acquire2", "LS", "R1", path, strconv.Itoa(2<<20), "0", "0", "self")
	t.Logf("acquire2 of LS:R1 against ours: %s", legit.Line)
	hostile := d.Call(t, 60*time.Second, "acquire2", exe, exe, exe, "0", "0", "0", "self")
	t.Logf("acquire2 naming %s against ours: %s", exe, hostile.Line)
	assert.Less(t, hostile.RV, 0, "an error reply")

	_, err = os.Stat(ran)
	assert.True(t, os.IsNotExist(err), "the executable ran")
	assert.NotContains(t, out(), "reexec", "our daemon tried a reexec")
	assert.Equal(t, before, pid(), "the same daemon serves")
	inq, err = holder.Inquire(context.Background())
	require.NoError(t, err)
	assert.Equal(t, state, inq.State, "the lease is still held")
	_, _, err = cl.Version(context.Background())
	require.NoError(t, err)
}
