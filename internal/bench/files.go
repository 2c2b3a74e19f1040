package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/gosanlock/gosanlock/client"
)

// makeFile creates path with size bytes. written: every byte is written
// (zeros) and synced, so no read hits a hole and no write allocates;
// otherwise the file is sparse and only what the daemon formats is written.
func makeFile(path string, size int64, written bool) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if !written {
		return f.Truncate(size)
	}
	buf := make([]byte, mib)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// resource returns the one-disk resource name at path:offset in lockspace ls.
func resource(ls, name, path string, offset uint64) client.Resource {
	return client.Resource{LockspaceName: ls, Name: name, Disks: []client.Disk{{Path: path, Offset: offset}}}
}

// formatLockspace writes the delta leases of lockspace name at path:0
// through the daemon (write_lockspace, io_timeout in the leases).
func formatLockspace(d *daemon, name, path string, ioTimeout uint32) error {
	ls := &client.Lockspace{Name: name, Disk: client.Disk{Path: path}}
	if err := d.retryBusy(func() error { return d.cl.WriteLockspace(context.Background(), ls, 0, ioTimeout) }); err != nil {
		return fmt.Errorf("%s: write_lockspace %s: %w", d.impl.Name, path, err)
	}
	return nil
}

// formatResource writes a resource lease through the daemon.
func formatResource(d *daemon, r client.Resource) error {
	if err := d.retryBusy(func() error { return d.cl.WriteResource(context.Background(), &r, 0, 0, 0) }); err != nil {
		return fmt.Errorf("%s: write_resource %s:%s:%d: %w", d.impl.Name, r.Name, r.Disks[0].Path, r.Disks[0].Offset, err)
	}
	return nil
}
