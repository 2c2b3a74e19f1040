// Package watchdog is the real Linux watchdog device for wdmd: open
// write-only, WDIOC_GETTIMEOUT, WDIOC_SETTIMEOUT, WDIOC_KEEPALIVE, and
// the magic close (write "V", then close). docs/wdmd.md "Device rules".
package watchdog

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wdmd"
)

// The ioctl request numbers come from x/sys (unix.WDIOC_*), which has
// the right value for every architecture: the _IOC direction bits differ
// between, for example, amd64/arm64 and ppc64le, so hard-coded numbers
// would be wrong on some of them.

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

// GetTimeout implements wdmd.Watchdog.
func (d *Device) GetTimeout() (int, error) {
	v, err := unix.IoctlGetInt(d.fd, unix.WDIOC_GETTIMEOUT)
	return int32Result(v), err
}

// SetTimeout implements wdmd.Watchdog; it returns the timeout the driver
// actually set. WDIOC_SETTIMEOUT takes a pointer to a C int and the driver
// writes the rounded value back through it; x/sys does not return that
// write-back, so the value is read again with WDIOC_GETTIMEOUT.
func (d *Device) SetTimeout(t int) (int, error) {
	if err := unix.IoctlSetPointerInt(d.fd, unix.WDIOC_SETTIMEOUT, t); err != nil {
		return t, err
	}
	return d.GetTimeout()
}

// Keepalive implements wdmd.Watchdog.
func (d *Device) Keepalive() error {
	return unix.IoctlWatchdogKeepalive(d.fd)
}

// Write implements wdmd.Watchdog.
func (d *Device) Write(p []byte) (int, error) { return unix.Write(d.fd, p) }

// Identity is the driver's name (WDIOC_GETSUPPORT), shown by the dump.
func (d *Device) Identity() (string, error) {
	info, err := unix.IoctlGetWatchdogInfo(d.fd)
	if err != nil {
		return "", err
	}
	id := info.Identity[:]
	for i, c := range id {
		if c == 0 {
			id = id[:i]
			break
		}
	}
	return string(id), nil
}

// Fd is the device's descriptor (printed by wdmd --trytimeout).
func (d *Device) Fd() int { return d.fd }

// Close implements wdmd.Watchdog.
func (d *Device) Close() error {
	if d.fd < 0 {
		return unix.EBADF
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// int32Result converts the value unix.IoctlGetInt returns for an ioctl
// whose argument is a C int: the kernel writes 4 bytes into a Go int of 8,
// which on a big-endian 64-bit machine land in the upper half.
func int32Result(v int) int {
	if bigEndian && v != 0 && int64(v)&0xffffffff == 0 {
		return int(int32(int64(v) >> 32))
	}
	return int(int32(v))
}

var bigEndian = func() bool {
	var x uint16 = 1
	return (*[2]byte)(unsafe.Pointer(&x))[0] == 0
}()
