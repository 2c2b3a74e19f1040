package daemon

import "github.com/gosanlock/gosanlock/internal/sdnotify"

// notifySystemd tells systemd (Type=notify units, docs/systemd.md) that the
// daemon serves requests, and sends the WatchdogSec= pings while it runs.
// Run calls it once Start has returned nil and calls the returned function
// when the daemon ends (it sends STOPPING=1). Without NOTIFY_SOCKET it does
// nothing.
func (s *Server) notifySystemd() (stop func()) {
	return sdnotify.Start(func() bool {
		select {
		case <-s.Done():
			return false
		default:
			return true
		}
	})
}
