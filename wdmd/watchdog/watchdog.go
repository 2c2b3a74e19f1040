// Package watchdog is the real Linux watchdog device for wdmd: open
// write-only, WDIOC_GETTIMEOUT, WDIOC_SETTIMEOUT, WDIOC_KEEPALIVE, and
// the magic close (write "V", then close). wdmd.md §5.1.
package watchdog

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wdmd"
)

// The ioctl numbers of <linux/watchdog.h> (x86-64, arm64 and every
// architecture with the generic _IOC layout).
const (
	ioctlKeepalive  = 0x80045705 // _IOR('W', 5, int)
	ioctlSetTimeout = 0xC0045706 // _IOWR('W', 6, int)
	ioctlGetTimeout = 0x80045707 // _IOR('W', 7, int)
)

// Driver opens /dev/watchdog* devices.
type Driver struct{}

var _ wdmd.Driver = Driver{}

// Stat implements wdmd.Driver.
func (Driver) Stat(path string) error {
	_, err := os.Stat(path)
	return err
}

// Open implements wdmd.Driver: open(2) write-only and close-on-exec,
// which starts the device's timer.
func (Driver) Open(path string) (wdmd.Watchdog, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &Device{fd: fd}, nil
}

// Device is one open watchdog device.
type Device struct{ fd int }

func (d *Device) ioctl(req uintptr, v *int32) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), req, uintptr(unsafe.Pointer(v)))
	if e != 0 {
		return e
	}
	return nil
}

// GetTimeout implements wdmd.Watchdog.
func (d *Device) GetTimeout() (int, error) {
	var v int32
	err := d.ioctl(ioctlGetTimeout, &v)
	return int(v), err
}

// SetTimeout implements wdmd.Watchdog; it returns the timeout the driver
// actually set.
func (d *Device) SetTimeout(t int) (int, error) {
	v := int32(t)
	err := d.ioctl(ioctlSetTimeout, &v)
	return int(v), err
}

// Keepalive implements wdmd.Watchdog.
func (d *Device) Keepalive() error {
	var v int32
	return d.ioctl(ioctlKeepalive, &v)
}

// Write implements wdmd.Watchdog.
func (d *Device) Write(p []byte) (int, error) { return unix.Write(d.fd, p) }

// Close implements wdmd.Watchdog.
func (d *Device) Close() error {
	if d.fd < 0 {
		return unix.EBADF
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}
