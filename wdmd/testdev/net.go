package testdev

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wdmd"
)

// The socket protocol between a wdmd process and a served Bank is one
// text line per request and per answer. A connection starts with
// "stat PATH" (answered, then closed) or "open PATH"; after a successful
// open the same connection carries "get", "set N", "ping", "write HEX"
// and "close". Answers are "ok N" or "err ERRNO". A connection that ends
// without "close" is an unclean close, as when the holder dies.

// Server serves a Bank on a unix socket.
type Server struct {
	b  *Bank
	l  *net.UnixListener
	wg sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
}

// Serve listens on the unix socket path and serves b until Close.
func (b *Bank) Serve(path string) (*Server, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	s := &Server{b: b, l: l, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops serving; open devices get an unclean close.
func (s *Server) Close() error {
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.l.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
		}()
	}
}

func answer(c net.Conn, v int, err error) {
	if err != nil {
		var e unix.Errno
		if !errors.As(err, &e) {
			e = unix.EIO
		}
		fmt.Fprintf(c, "err %d\n", int(e))
		return
	}
	fmt.Fprintf(c, "ok %d\n", v)
}

func (s *Server) serve(c net.Conn) {
	r := bufio.NewReader(c)
	var h *handle
	defer func() {
		if h != nil && !h.closed {
			_ = h.Close()
		}
	}()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		op, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		if h == nil {
			switch op {
			case "stat":
				answer(c, 0, s.b.stat(arg))
				return
			case "open":
				var err error
				h, err = s.b.open(arg)
				answer(c, 0, err)
				if err != nil {
					return
				}
				continue
			}
			answer(c, 0, unix.EINVAL)
			return
		}
		switch op {
		case "get":
			v, err := h.GetTimeout()
			answer(c, v, err)
		case "set":
			n, _ := strconv.Atoi(arg)
			v, err := h.SetTimeout(n)
			answer(c, v, err)
		case "ping":
			answer(c, 0, h.Keepalive())
		case "write":
			p, err := hex.DecodeString(arg)
			if err != nil {
				answer(c, 0, unix.EINVAL)
				continue
			}
			n, err := h.Write(p)
			answer(c, n, err)
		case "close":
			answer(c, 0, h.Close())
			return
		default:
			answer(c, 0, unix.EINVAL)
		}
	}
}

// opTimeout bounds every request to a served bank, so a stuck test
// harness never blocks wdmd for long.
const opTimeout = 2 * time.Second

// Dial returns a wdmd.Driver that uses the bank served at socket path.
func Dial(path string) wdmd.Driver { return remoteDriver{path} }

type remoteDriver struct{ sock string }

type remote struct {
	c net.Conn
	r *bufio.Reader
}

func (d remoteDriver) connect() (*remote, error) {
	c, err := net.DialTimeout("unix", d.sock, opTimeout)
	if err != nil {
		return nil, unix.EIO
	}
	return &remote{c: c, r: bufio.NewReader(c)}, nil
}

func (r *remote) call(format string, args ...any) (int, error) {
	_ = r.c.SetDeadline(time.Now().Add(opTimeout))
	if _, err := fmt.Fprintf(r.c, format+"\n", args...); err != nil {
		return 0, unix.EIO
	}
	line, err := r.r.ReadString('\n')
	if err != nil {
		return 0, unix.EIO
	}
	word, num, _ := strings.Cut(strings.TrimSpace(line), " ")
	n, _ := strconv.Atoi(num)
	switch word {
	case "ok":
		return n, nil
	case "err":
		return 0, unix.Errno(n)
	}
	return 0, unix.EIO
}

func (d remoteDriver) Stat(path string) error {
	r, err := d.connect()
	if err != nil {
		return err
	}
	defer r.c.Close()
	_, err = r.call("stat %s", path)
	return err
}

func (d remoteDriver) Open(path string) (wdmd.Watchdog, error) {
	r, err := d.connect()
	if err != nil {
		return nil, err
	}
	if _, err := r.call("open %s", path); err != nil {
		_ = r.c.Close()
		return nil, err
	}
	return &remoteWatchdog{r: r}, nil
}

type remoteWatchdog struct {
	r      *remote
	closed bool
}

func (w *remoteWatchdog) GetTimeout() (int, error)      { return w.r.call("get") }
func (w *remoteWatchdog) SetTimeout(t int) (int, error) { return w.r.call("set %d", t) }
func (w *remoteWatchdog) Keepalive() error {
	_, err := w.r.call("ping")
	return err
}
func (w *remoteWatchdog) Write(p []byte) (int, error) {
	return w.r.call("write %s", hex.EncodeToString(p))
}

// Close ends the connection. A pending magic 'V' write makes it a clean
// close on the bank's side; the bank decides, as the kernel does.
func (w *remoteWatchdog) Close() error {
	if w.closed {
		return unix.EBADF
	}
	w.closed = true
	_, err := w.r.call("close")
	_ = w.r.c.Close()
	return err
}
