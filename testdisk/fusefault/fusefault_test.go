package fusefault_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

func mount(t *testing.T, backing string) *fusefault.FS {
	t.Helper()
	fs, err := fusefault.Mount(backing, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Close(); err != nil {
			t.Error(err)
		}
	})
	return fs
}

// leaseDir returns a backing directory on a real disk file system (O_DIRECT
// fails on tmpfs) holding a 1 MiB file "lease"; it is removed after t.
func leaseDir(t *testing.T) string {
	t.Helper()
	backing, err := os.MkdirTemp("/var/tmp", "fusefault-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(backing) })
	if err := os.WriteFile(backing+"/lease", make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return backing
}

// TestViews: two mounts of one backing directory share every byte through
// O_DIRECT I/O (no cache in either mount), and faults of one mount do not
// touch the other.
func TestViews(t *testing.T) {
	testenv.NeedRoot(t, "FUSE mounts")
	backing := leaseDir(t)
	m1, m2 := mount(t, backing), mount(t, backing)
	open := func(fs *fusefault.FS) *diskio.File {
		d, err := diskio.OpenFile(fs.Path("lease"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	d1, d2 := open(m1), open(m2)
	ctx := context.Background()
	w := bytes.Repeat([]byte("lease!!\n"), 512)
	for i := 0; i < 3; i++ {
		w[0] = byte(i)
		if err := d1.WriteAt(ctx, w, 4096); err != nil {
			t.Fatal(err)
		}
		r := make([]byte, 1<<20) // one 1 MiB request, like a renewal read
		if err := d2.ReadAt(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r[4096:8192], w) {
			t.Fatalf("write %d through mount 1 not seen through mount 2", i)
		}
	}

	one := make([]byte, 512)
	m2.SetFault(fusefault.Fault{Mode: fusefault.Error, Ops: fusefault.Writes})
	if err := d2.ReadAt(ctx, one, 0); err != nil {
		t.Fatalf("read with a write-only fault: %v", err)
	}
	if err := d2.WriteAt(ctx, one, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write with an EIO fault: %v", err)
	}
	if err := d1.WriteAt(ctx, one, 0); err != nil {
		t.Fatalf("write through the other mount: %v", err)
	}

	m2.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	done := make(chan error, 1)
	go func() { done <- d2.ReadAt(ctx, make([]byte, 512), 0) }()
	for m2.Stats().Hung != 1 { // the read is held in the fault layer
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("read through a hung mount returned %v", err)
	default:
	}
	if err := d1.ReadAt(ctx, one, 0); err != nil {
		t.Fatalf("read through the other mount while one hangs: %v", err)
	}
	m2.SetFault(fusefault.Fault{})
	if err := <-done; err != nil {
		t.Fatalf("held read after release: %v", err)
	}

	// A delayed request is served once its delay has passed...
	m2.SetFault(fusefault.Fault{Mode: fusefault.Delay, Delay: 10 * time.Millisecond})
	if err := d2.ReadAt(ctx, one, 0); err != nil {
		t.Fatalf("delayed read: %v", err)
	}
	if st := m2.Stats(); st.Delayed != 1 {
		t.Fatalf("the read was not delayed: stats %+v", st)
	}
	// ... and not before: under a delay longer than the test, the read
	// waits in the fault layer until the fault changes.
	m2.SetFault(fusefault.Fault{Mode: fusefault.Delay, Delay: time.Hour})
	go func() { done <- d2.ReadAt(ctx, make([]byte, 512), 0) }()
	for m2.Stats().Delayed != 2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("read returned during its delay: %v", err)
	default:
	}
	m2.SetFault(fusefault.Fault{})
	if err := <-done; err != nil {
		t.Fatalf("delayed read after the fault changed: %v", err)
	}
	st := m2.Stats()
	if st.Errors != 1 || st.Hung != 1 || st.Delayed != 2 || st.Reads < 5 {
		t.Fatalf("stats %+v", st)
	}
	if entries, err := os.ReadDir(m1.Dir); err != nil || len(entries) != 1 || entries[0].Name() != "lease" {
		t.Fatalf("readdir: %v %v", entries, err)
	}
}

// TestCloseWithHungRequest: Close fails a held request and unmounts even
// while a file is open.
func TestCloseWithHungRequest(t *testing.T) {
	testenv.NeedRoot(t, "FUSE mounts")
	backing := t.TempDir()
	if err := os.WriteFile(backing+"/f", make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := fusefault.Mount(backing, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(fs.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	done := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(make([]byte, 512), 0)
		done <- err
	}()
	for fs.Stats().Hung != 1 { // the read is held in the fault layer
		time.Sleep(time.Millisecond)
	}
	if err := fs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := <-done; err == nil { // a read still blocked hangs the test: its timeout reports it
		t.Fatal("held read succeeded after Close")
	}
}

// TestSyncDIOAndTrace: a hung O_DIRECT read through diskio (io_submit)
// returns at its timeout on a mount with asynchronous direct I/O, and only
// when the hang ends on a SyncDIO mount; the request log records each read
// once it is answered, held by the hang.
func TestSyncDIOAndTrace(t *testing.T) {
	testenv.NeedRoot(t, "FUSE mounts")
	backing := leaseDir(t)
	const hold = 500 * time.Millisecond
	for _, syncDIO := range []bool{false, true} {
		fs, err := fusefault.MountWith(backing, t.TempDir(), fusefault.Options{SyncDIO: syncDIO})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		d, err := diskio.OpenFile(fs.Path("lease"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		fs.StartTrace()
		fs.SetFault(fusefault.Fault{Mode: fusefault.Hang})
		time.AfterFunc(hold, func() { fs.SetFault(fusefault.Fault{}) })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		err = d.ReadAt(ctx, make([]byte, 512), 0)
		took := time.Since(start)
		cancel()
		if !syncDIO && took >= hold {
			t.Errorf("asynchronous direct I/O: the hung read returned after %v (%v), want at its 50 ms timeout", took, err)
		}
		if syncDIO && took < hold {
			t.Errorf("SyncDIO: the hung read returned after %v (%v), want when the hang ended (%v)", took, err, hold)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(fs.Trace()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		tr := fs.Trace()
		if len(tr) != 1 || tr[0].Op != "read" || tr[0].File != "lease" || tr[0].Size != 512 || !tr[0].Held ||
			tr[0].Errno != 0 || time.Duration(tr[0].Done-tr[0].Arrived) < hold/2 {
			t.Errorf("SyncDIO %v: trace %+v, want one held read of 512 bytes answered after the hang", syncDIO, tr)
		}
	}
}
