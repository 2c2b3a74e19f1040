package fusefault_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

// threads counts the OS threads of this process.
func threads(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHungDiskThreads: while the storage of ten disks
// hangs (every request held, as under dmsetup suspend), repeated renewals
// that time out cost no thread with native AIO, and at most the per-device
// stuck limit with the synchronous fallback; before, every timed-out read
// left one more thread stuck in the kernel. When the storage returns, the
// stuck requests complete and the devices work again.
func TestHungDiskThreads(t *testing.T) {
	testenv.NeedRoot(t, "FUSE mounts")
	const (
		disks  = 10
		rounds = 12
	)
	backing, err := os.MkdirTemp("/var/tmp", "fusefault-threads-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(backing) })
	for i := range disks {
		if err := os.WriteFile(fmt.Sprintf("%s/d%d", backing, i), make([]byte, 2<<20), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fs := mount(t, backing)

	for _, mode := range []struct {
		name  string
		open  func(string) (*diskio.File, error)
		extra int // threads the hang may add per disk
	}{
		{"aio", diskio.OpenFile, 0},
		{"sync", diskio.OpenFileSync, 2},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var devs []*diskio.File
			for i := range disks {
				d, err := mode.open(fs.Path(fmt.Sprintf("d%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				devs = append(devs, d)
			}
			if mode.name == "aio" && !devs[0].AIO() {
				_, err := diskio.AIOStatus()
				t.Skipf("no native AIO: %v", err)
			}
			renew := func(d *diskio.File, timeout time.Duration) error {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				b, err := diskio.ReadBuf(ctx, d, 1<<20, 0)
				if err != nil {
					return err
				}
				b.Release()
				return d.WriteAt(ctx, make([]byte, 512), 512)
			}
			for _, d := range devs {
				if err := renew(d, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			base := threads(t)
			t.Logf("healthy I/O done, hanging the disks")

			fs.SetFault(fusefault.Fault{Mode: fusefault.Hang})
			var peak atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if n := int64(threads(t)); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			var wg sync.WaitGroup
			errs := make(chan error, disks*rounds)
			for _, d := range devs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						err := renew(d, 30*time.Millisecond)
						if !errors.Is(err, rescode.ErrIOTimeout) {
							errs <- fmt.Errorf("%s: got %v, want a timeout", d.Path(), err)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			<-sampled
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			stuck := 0
			for _, d := range devs {
				if d.Stuck() > 2 {
					t.Errorf("%s: %d stuck requests", d.Path(), d.Stuck())
				}
				stuck += d.Stuck()
			}
			hung := fs.Stats().Hung
			t.Logf("%s: %d disks x %d timed-out renewals: threads %d before, peak %d during the hang; %d requests stuck, %d reached the hung disk",
				mode.name, disks, rounds, base, peak.Load(), stuck, hung)
			if limit := int64(base + disks*mode.extra + 4); peak.Load() > limit {
				t.Errorf("peak threads %d > %d", peak.Load(), limit)
			}

			fs.SetFault(fusefault.Fault{})
			t.Logf("storage back")
			deadline := time.Now().Add(30 * time.Second)
			for _, d := range devs {
				for d.Stuck() > 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if d.Stuck() > 0 {
					t.Fatalf("%s: %d requests still stuck after the storage returned", d.Path(), d.Stuck())
				}
				if err := renew(d, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
