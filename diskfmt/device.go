package diskfmt

import "context"

// Device is shared lease storage: a block device or a file, read and written
// in whole sectors. Every call takes a context whose deadline is the I/O
// timeout; a call that is still running at the deadline returns an error
// wrapping rescode.ErrIOTimeout, and the buffer the I/O was using is
// abandoned (never reused), so a late completion cannot corrupt later data.
//
// Offsets and lengths should be multiples of SectorSize; a device rejects
// what its hardware would (an O_DIRECT device returns EINVAL for a 512-byte
// write on a 4K device, exactly as sanlock sees it). Package diskio has the
// device over real files and block devices.
type Device interface {
	// ReadAt fills p from offset off. A read that ends past the end of the
	// device fills the rest of p with zeros and returns an error wrapping
	// io.ErrUnexpectedEOF.
	ReadAt(ctx context.Context, p []byte, off int64) error
	// WriteAt writes all of p at offset off.
	WriteAt(ctx context.Context, p []byte, off int64) error
	// SectorSize is the device's logical sector size (512 for files).
	SectorSize() int
	Close() error
}
