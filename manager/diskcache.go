package manager

import (
	"context"
	"sync"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

// diskCache shares one open device per path among the resource leases of
// the daemon, so descriptors grow with distinct disks, not with leases
// (sanlock 3.8.5 holds 1,500 leases on one file with 11 descriptors). A
// device is opened by its first user and closed with its last: every open
// returns the same *sharedDisk, and every Close of it drops one
// reference. A device is safe for concurrent use (diskio.File is), and
// its own per-device bounds (in-flight requests, stuck requests) then apply
// to the disk as a whole, which is what they are meant for.
type diskCache struct {
	open func(path string) (diskfmt.Device, error)

	mu    sync.Mutex
	disks map[string]*sharedDisk
}

// sharedDisk is one open device and its users. It implements
// diskfmt.Device (and diskio.BufReader, so pooled reads stay copy-free);
// Close releases one reference.
type sharedDisk struct {
	c     *diskCache
	path  string
	dev   diskfmt.Device // set once ready is closed (nil if the open failed)
	err   error
	refs  int           // under c.mu
	ready chan struct{} // closed when the first open has finished
}

func newDiskCache(open func(path string) (diskfmt.Device, error)) *diskCache {
	return &diskCache{open: open, disks: map[string]*sharedDisk{}}
}

// get returns the shared device for path, opening it if nobody holds it.
// Concurrent first users wait for one open; a failed open is not cached.
func (c *diskCache) get(path string) (diskfmt.Device, error) {
	c.mu.Lock()
	d := c.disks[path]
	if d != nil {
		d.refs++
		c.mu.Unlock()
		<-d.ready
		if d.err != nil {
			c.put(d)
			return nil, d.err
		}
		return d, nil
	}
	d = &sharedDisk{c: c, path: path, refs: 1, ready: make(chan struct{})}
	c.disks[path] = d
	c.mu.Unlock()

	d.dev, d.err = c.open(path)
	if d.err != nil {
		d.dev = nil // may be a typed nil (a nil *diskio.File)
		c.mu.Lock()
		if c.disks[path] == d {
			delete(c.disks, path) // later users try again
		}
		c.mu.Unlock()
	}
	close(d.ready)
	if d.err != nil {
		c.put(d)
		return nil, d.err
	}
	return d, nil
}

// put drops one reference and closes the device with its last user.
func (c *diskCache) put(d *sharedDisk) error {
	c.mu.Lock()
	d.refs--
	last := d.refs == 0
	if last && c.disks[d.path] == d {
		delete(c.disks, d.path)
	}
	c.mu.Unlock()
	if last && d.dev != nil {
		return d.dev.Close()
	}
	return nil
}

// open returns how many distinct devices are open.
func (c *diskCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.disks)
}

func (d *sharedDisk) ReadAt(ctx context.Context, p []byte, off int64) error {
	return d.dev.ReadAt(ctx, p, off)
}

func (d *sharedDisk) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.dev.WriteAt(ctx, p, off)
}

func (d *sharedDisk) ReadBuf(ctx context.Context, n int, off int64) (*diskio.Buf, error) {
	return diskio.ReadBuf(ctx, d.dev, n, off)
}

func (d *sharedDisk) SectorSize() int { return d.dev.SectorSize() }

// Close releases this user's reference.
func (d *sharedDisk) Close() error { return d.c.put(d) }
