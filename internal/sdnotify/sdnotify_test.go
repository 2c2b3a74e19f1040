package sdnotify

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// fakeSystemd listens where NOTIFY_SOCKET points, as systemd does.
func fakeSystemd(t *testing.T) *testutil.Notify {
	t.Helper()
	n := testutil.FakeSystemd(t, t.TempDir())
	t.Setenv(EnvSocket, n.Path)
	return n
}

// next returns the next datagram.
func next(t *testing.T, n *testutil.Notify) string { return n.Next(t) }

func TestReadyAndStopping(t *testing.T) {
	c := fakeSystemd(t)
	t.Setenv(EnvWatchdogUSec, "")
	require.True(t, Active())
	stop := Start(nil)
	require.Equal(t, StateReady, next(t, c))
	// The variables are gone for the programs the daemon starts.
	_, ok := os.LookupEnv(EnvSocket)
	require.False(t, ok)
	stop()
	stop()
	require.Equal(t, StateStopping, next(t, c))
}

func TestWatchdogPings(t *testing.T) {
	c := fakeSystemd(t)
	t.Setenv(EnvWatchdogUSec, "20000")
	t.Setenv(EnvWatchdogPid, strconv.Itoa(os.Getpid()))
	n := FromEnv(true)
	require.Equal(t, 20*time.Millisecond, n.WatchdogTimeout())
	stop := n.Ready(nil)
	require.Equal(t, StateReady, next(t, c))
	require.Equal(t, StateWatchdog, next(t, c))
	require.Equal(t, StateWatchdog, next(t, c))
	stop()
	// Pings may be queued before STOPPING; STOPPING is the last one.
	for {
		if s := next(t, c); s != StateWatchdog {
			require.Equal(t, StateStopping, s)
			break
		}
	}
}

func TestUnhealthyStopsPings(t *testing.T) {
	c := fakeSystemd(t)
	t.Setenv(EnvWatchdogUSec, "20000")
	t.Setenv(EnvWatchdogPid, "")
	asked := make(chan struct{}, 100)
	stop := Start(func() bool { asked <- struct{}{}; return false })
	require.Equal(t, StateReady, next(t, c))
	<-asked
	<-asked
	stop()
	require.Equal(t, StateStopping, next(t, c))
}

func TestWatchdogInterval(t *testing.T) {
	require.Zero(t, watchdogInterval("", "", 7))
	require.Zero(t, watchdogInterval("x", "", 7))
	require.Zero(t, watchdogInterval("0", "", 7))
	require.Zero(t, watchdogInterval("1000", "8", 7), "another process's watchdog")
	require.Equal(t, time.Millisecond, watchdogInterval("1000", "7", 7))
	require.Equal(t, 30*time.Second, watchdogInterval("30000000", "", 7))
}

func TestNoSocket(t *testing.T) {
	t.Setenv(EnvSocket, "")
	require.False(t, Active())
	require.Nil(t, FromEnv(false))
	var n *Notifier
	require.NoError(t, n.Send(StateReady))
	require.Zero(t, n.WatchdogTimeout())
	Start(nil)()
	t.Setenv(EnvSocket, "relative/path")
	require.Nil(t, FromEnv(false))
}

func TestAbstractSocket(t *testing.T) {
	name := "@gosanlock-sdnotify-test-" + strconv.Itoa(os.Getpid())
	c := testutil.ListenNotify(t, name)
	t.Setenv(EnvSocket, name)
	require.NoError(t, FromEnv(false).Send(StateReady))
	require.Equal(t, StateReady, next(t, c))
}
