package diskio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAIOConcurrentSelfReap runs concurrent writers and readers on two
// devices sharing the process-wide AIO context, with the fast path (a
// caller waiting for completions in io_getevents itself) on and off: every
// request must complete with its own data whoever collects its completion,
// the caller, another caller or the background reaper, and requests
// submitted without an eventfd signal (quiet) are all accounted for.
func TestAIOConcurrentSelfReap(t *testing.T) {
	if ok, _ := AIOStatus(); !ok {
		t.Skip("no native AIO")
	}
	dir, err := os.MkdirTemp("/var/tmp", "gs-diskio-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	const workers, rounds = 8, 40
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("selfReap=%v", on), func(t *testing.T) {
			// The process's engine has the fast path; one of the test's
			// own has not (its context stays until the process ends).
			eng := sharedAIO()
			if !on {
				eng, err = newAIOEngine(4*workers, false)
				require.NoError(t, err)
			}
			var devs [2]*File
			for i := range devs {
				p := filepath.Join(dir, fmt.Sprintf("d%d-%v", i, on))
				require.NoError(t, os.WriteFile(p, make([]byte, workers*4096), 0o644))
				devs[i], err = openFile(p)
				require.NoError(t, err)
				devs[i].aio = eng
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*workers)
			for w := range 2 * workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := devs[w%2]
					off := int64(w/2) * 4096
					for r := range rounds {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						p := bytes.Repeat([]byte{byte(w*rounds + r)}, 4096)
						err := d.WriteAt(ctx, p, off)
						var b *Buf
						if err == nil {
							b, err = ReadBuf(ctx, d, 4096, off)
						}
						cancel()
						if err != nil {
							errs <- err
							return
						}
						same := bytes.Equal(b.Bytes(), p)
						b.Release()
						if !same {
							errs <- fmt.Errorf("worker %d round %d: read back other data", w, r)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for _, d := range devs {
				require.NoError(t, d.Close())
			}
			// Every quiet request (no eventfd signal) was accounted for.
			require.Zero(t, eng.quiet.Load())
		})
	}
}
