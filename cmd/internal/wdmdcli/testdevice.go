//go:build wdmd_testdev

package wdmdcli

import (
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// With -tags wdmd_testdev, --test-device SOCKET drives an emulated
// watchdog device bank served by wdmd-testdev or a test (package
// wdmd/testdev) instead of /dev/watchdog*. It gives no protection, so the
// production binary is built without it.
func init() {
	testDevice = func(socket string) wdmd.Driver { return testdev.Dial(socket) }
}
