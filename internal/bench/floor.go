package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/ncw/directio"
	"golang.org/x/sys/unix"
)

// The floor is the storage's own cost of one acquire+release pair of an
// uncontended EX lease: exactly the reads and writes a daemon must do, with
// no daemon. A 1 MiB lease area at offset 0 of a written file, host_id 1
// (leader sector 0, dblock sector 2):
//
//	acquire: read 1 MiB, write 512 B dblock   (ballot phase 1)
//	         read 1 MiB, write 512 B dblock   (phase 2)
//	         read 1 MiB, write 512 B leader   (commit)
//	release: write 512 B dblock, read 512 B leader, write 512 B leader
//
// opened O_DIRECT|O_SYNC, like the daemons.
type floorFile struct {
	f     *os.File
	fd    int
	area  []byte
	small []byte
}

func openFloor(path string) (*floorFile, error) {
	if err := makeFile(path, mib, true); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT|syscall.O_SYNC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s O_DIRECT: %w", path, err)
	}
	ff := &floorFile{f: f, fd: int(f.Fd()), area: directio.AlignedBlock(mib), small: directio.AlignedBlock(4096)[:512]}
	for i := range ff.small {
		ff.small[i] = byte(i)
	}
	return ff, nil
}

func (ff *floorFile) close() { ff.f.Close() }

func (ff *floorFile) read(b []byte, off int64) error {
	n, err := unix.Pread(ff.fd, b, off)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short read %d of %d", n, len(b))
	}
	return err
}

func (ff *floorFile) write(b []byte, off int64) error {
	n, err := unix.Pwrite(ff.fd, b, off)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write %d of %d", n, len(b))
	}
	return err
}

const (
	leaderOff = 0
	dblockOff = 2 * 512
)

// pair does one acquire+release I/O sequence.
func (ff *floorFile) pair() error {
	for _, op := range [...]struct {
		read bool
		b    []byte
		off  int64
	}{
		{true, ff.area, 0}, {false, ff.small, dblockOff},
		{true, ff.area, 0}, {false, ff.small, dblockOff},
		{true, ff.area, 0}, {false, ff.small, leaderOff},
		{false, ff.small, dblockOff}, {true, ff.small, leaderOff}, {false, ff.small, leaderOff},
	} {
		var err error
		if op.read {
			err = ff.read(op.b, op.off)
		} else {
			err = ff.write(op.b, op.off)
		}
		if err != nil {
			return fmt.Errorf("floor I/O on %s: %w", ff.f.Name(), err)
		}
	}
	return nil
}

// floorSerial times n sequences on one file.
func floorSerial(ctx context.Context, path string, n int) ([]time.Duration, error) {
	ff, err := openFloor(path)
	if err != nil {
		return nil, err
	}
	defer ff.close()
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if err := ff.pair(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, ctx.Err()
}

// floorParallel runs len(paths) concurrent sequences, one per file, n pairs
// each, and returns the pairs per second of all of them.
func floorParallel(ctx context.Context, paths []string, n int) (float64, error) {
	files := make([]*floorFile, len(paths))
	for i, p := range paths {
		ff, err := openFloor(p)
		if err != nil {
			return 0, err
		}
		defer ff.close()
		files[i] = ff
	}
	var wg sync.WaitGroup
	errs := make([]error, len(files))
	t0 := time.Now()
	for i, ff := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n && ctx.Err() == nil; j++ {
				if err := ff.pair(); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(n*len(files)) / el.Seconds(), ctx.Err()
}
