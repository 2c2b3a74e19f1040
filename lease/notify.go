package lease

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// How the daemon tells this process to let go, without signals.
//
// Both daemons (ours and sanlock 3.8.5) run a client's "kill program"
// instead of sending SIGTERM when its lockspace fails (once, at the start of
// the grace period before SIGKILL) and when another host makes a graceful
// request for one of its leases (docs/protocol.md "Kill program"). The
// session installs touch(1) on a file in a private directory as that
// program, and watches the directory with inotify. The notice carries no
// details; the session then reads the lockspace states (STATUS) and the
// request records of its leases to learn what was lost and why.
//
// The process's signal handling is not touched: a SIGTERM sent to it by
// someone else still has its usual effect.

// touchPrograms are where touch(1) is looked for.
var touchPrograms = []string{"/usr/bin/touch", "/bin/touch"}

type notifier struct {
	dir     string
	program string // kill program path
	args    string // its arguments (escaped for the daemon's splitting)
	fd      int    // inotify descriptor
	c       chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

// killpathMax is the size of the kill program's path and args fields,
// terminating NUL included.
const killpathMax = 128

func newNotifier() (*notifier, error) {
	prog := ""
	for _, p := range touchPrograms {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			prog = p
			break
		}
	}
	if prog == "" {
		return nil, errors.New("lease: touch(1) not found; it is the kill program of loss notices")
	}
	dir, err := os.MkdirTemp("", "gslease-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "notice")
	if len(file) >= killpathMax || strings.ContainsAny(file, " \t\n\\") {
		os.RemoveAll(dir)
		return nil, errors.New("lease: temporary directory path unusable as kill program argument: " + file)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		os.RemoveAll(dir)
		return nil, err
	}
	n := &notifier{dir: dir, program: prog, args: file, fd: fd,
		c: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	go n.run()
	return n, nil
}

// run turns inotify events into (coalesced) notices.
func (n *notifier) run() {
	defer close(n.exited)
	buf := make([]byte, 4096)
	fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}}
	for {
		select {
		case <-n.quit:
			return
		default:
		}
		k, err := unix.Poll(fds, 200)
		if err != nil && err != unix.EINTR {
			return
		}
		if k <= 0 {
			continue
		}
		got := false
		for {
			m, err := unix.Read(n.fd, buf)
			if m <= 0 || err != nil {
				break
			}
			got = true
		}
		if got {
			select {
			case n.c <- struct{}{}:
			default:
			}
		}
	}
}

func (n *notifier) close() {
	close(n.quit)
	<-n.exited
	unix.Close(n.fd)
	os.RemoveAll(n.dir)
}

// waitHangup blocks until the peer of conn hangs up (true) or stop is
// closed (false). It polls for POLLRDHUP only, so it never consumes or
// races with the replies read by other goroutines.
func waitHangup(conn *net.UnixConn, stop <-chan struct{}) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	for {
		select {
		case <-stop:
			return false
		default:
		}
		hup := false
		cerr := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if k, err := unix.Poll(fds, 200); err == nil && k > 0 &&
				fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
				hup = true
			}
		})
		if cerr != nil {
			// Closed by us (Session.Close).
			return false
		}
		if hup {
			return true
		}
	}
}
