package wire

import (
	"syscall"
	"testing"
)

func TestRestrictSignal(t *testing.T) {
	for _, tc := range []struct {
		restrict uint32
		sig      syscall.Signal
		want     syscall.Signal
	}{
		{0, syscall.SIGKILL, syscall.SIGKILL},
		{0, syscall.SIGTERM, syscall.SIGTERM},
		{RestrictSigkill, syscall.SIGKILL, syscall.SIGTERM},
		{RestrictSigkill, syscall.SIGTERM, syscall.SIGTERM},
		{RestrictSigterm, syscall.SIGTERM, syscall.SIGKILL},
		{RestrictSigterm, syscall.SIGKILL, syscall.SIGKILL},
		{RestrictSigkill | RestrictSigterm, syscall.SIGKILL, syscall.SIGKILL},
		{RestrictSigkill | RestrictSigterm, syscall.SIGTERM, syscall.SIGKILL},
		{RestrictAll, syscall.SIGKILL, syscall.SIGKILL},
		{RestrictSigkill | RestrictSigterm, syscall.SIGUSR1, syscall.SIGUSR1},
	} {
		if got := RestrictSignal(tc.restrict, tc.sig); got != tc.want {
			t.Errorf("restrict %#x, %v: got %v, want %v", tc.restrict, tc.sig, got, tc.want)
		}
	}
}
