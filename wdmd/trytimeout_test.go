package wdmd_test

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// TestTryTimeout: -t sets the timeout when it differs, pings, disarms;
// with -F it counts the seconds up to timeout+4 (the emulated device fires
// at the timeout) and disarms; no device: exit 1.
func TestTryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewAt(base * time.Second)
		bank := testdev.NewBank(testdev.Options{Clock: clk, Paths: []string{"/dev/watchdog1"}})
		wall := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
		var out, errb bytes.Buffer
		o := wdmd.TryOptions{Timeout: 3, Force: true, Clock: clk, Wall: wall}
		require.Equal(t, 0, wdmd.TryTimeout(t.Context(), bank.Driver(), o, &out, &errb))
		p := "2026-01-02 03:04:05  "
		require.Equal(t, p+"/dev/watchdog1 open fd -1\n"+
			p+"/dev/watchdog1 gettimeout 60\n"+
			p+"/dev/watchdog1 settimeout 3 result 3\n"+
			p+"/dev/watchdog1 gettimeout 3\n"+
			p+"/dev/watchdog1 keepalive fd -1 result 0\n"+
			p+"waiting for watchdog to reset machine:\n"+
			p+"1\n"+p+"2\n"+p+"3\n"+
			p+"4 /dev/watchdog1 failed to fire after timeout 3 seconds\n"+
			p+"5 /dev/watchdog1 failed to fire after timeout 3 seconds\n"+
			p+"6 /dev/watchdog1 failed to fire after timeout 3 seconds\n"+
			p+"7 /dev/watchdog1 failed to fire after timeout 3 seconds\n"+
			p+"/dev/watchdog1 disarm write V fd -1 result 0\n"+
			p+"/dev/watchdog1 close fd -1 result 0\n", out.String())
		require.Equal(t, "/dev/watchdog0 stat error 2\n", errb.String())
		ev, fired := bank.FireEvent()
		require.True(t, fired)
		require.Equal(t, time.Duration(base+3), ev.At/time.Second)
		require.False(t, bank.Armed("/dev/watchdog1"))

		out.Reset()
		errb.Reset()
		o = wdmd.TryOptions{Timeout: 3, Clock: clk, Wall: wall}
		require.Equal(t, 0, wdmd.TryTimeout(t.Context(), bank.Driver(), o, &out, &errb))
		require.NotContains(t, out.String(), "settimeout") // already 3
		require.NotContains(t, out.String(), "waiting")

		empty := testdev.NewBank(testdev.Options{Clock: clk, Paths: []string{}})
		errb.Reset()
		require.Equal(t, 1, wdmd.TryTimeout(t.Context(), empty.Driver(), o, &out, &errb))
		require.True(t, strings.HasSuffix(errb.String(), "no watchdog device, load a watchdog driver\n"))
		bank.Stop()
		empty.Stop()
	})
}
