package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRenewalBar: the bar of one renewal against its io_timeout budget.
func TestRenewalBar(t *testing.T) {
	for _, c := range []struct {
		read, write, fail int64
		budget            uint64
		want              string
	}{
		{0, 0, 0, 10, "|                    |     0 ms of 10 s   0.0%"},
		{2, 1, 0, 10, "|▏                   |     3 ms of 10 s   0.0%"},
		{600, 400, 0, 10, "|██                  |  1000 ms of 10 s  10.0%"},
		{500, 125, 0, 1, "|████████████▌       |   625 ms of 1 s  62.5%"},
		{900, 900, 0, 1, "|████████████████████|  1800 ms of 1 s 180.0% over"},
		{-1, 3, 2, 1, "|▏                   |     3 ms of 1 s   0.3% then 2 failed"},
		{4, 5, 0, 0, "    9 ms"},
	} {
		if got := renewalBar(c.read, c.write, c.fail, c.budget); got != c.want {
			t.Errorf("renewalBar(%d, %d, %d, %d) = %q, want %q", c.read, c.write, c.fail, c.budget, got, c.want)
		}
	}
}

// openPTY opens a pseudo-terminal: the controlling side and the terminal
// the tool writes to.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	ptm = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	// Raw output: no \n to \r\n on the way to ptm.
	tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close(); pts.Close() })
	return ptm, pts
}

// runOn runs the tool in-process with stdout on w (a pipe or a pty, as a
// real stdout would be) and returns what came out of r.
func runOn(t *testing.T, r io.Reader, w *os.File, args ...string) (string, int) {
	t.Helper()
	got := make(chan string)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil || bytes.HasSuffix(b.Bytes(), []byte("\x00END\n")) {
				break
			}
		}
		got <- strings.TrimSuffix(b.String(), "\x00END\n")
	}()
	f := NewFactory("sanlock", w, io.Discard)
	f.ConfigPath = "/nonexistent/sanlock.conf"
	rc := f.Main(args)
	f.Out.Flush()
	w.Write([]byte("\x00END\n"))
	select {
	case s := <-got:
		return s, rc
	case <-time.After(30 * time.Second):
		t.Fatal("no output")
	}
	return "", rc
}

// TestRenewalTerminal: `client renewal` into a pipe prints the daemon's
// records as 3.8.5 does; on a terminal each line gets its bar against the
// lockspace's io_timeout (1 s here).
func TestRenewalTerminal(t *testing.T) {
	d := readableDaemon(t)
	recs, err := d.Client().Renewal(context.Background(), "LS")
	if err != nil || len(recs) < 2 {
		t.Fatalf("renewal: %v %v", recs, err)
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	piped, rc := runOn(t, pr, pw, "client", "renewal", "-s", "LS")
	lines := strings.Split(strings.TrimSuffix(piped, "\n"), "\n")
	if rc != 0 || len(lines) < len(recs) {
		t.Fatalf("piped rc %d:\n%s", rc, piped)
	}
	plain := regexp.MustCompile(`^timestamp=\d+ read_ms=-?\d+ write_ms=-?\d+ next_timeouts=\d+ next_errors=\d+$`)
	for i, l := range lines {
		if !plain.MatchString(l) {
			t.Errorf("piped line %d is not a bare record: %q", i, l)
		}
		if i < len(recs) && l != recs[i].Text {
			t.Errorf("piped line %d: %q, want the record %q", i, l, recs[i].Text)
		}
	}

	ptm, pts := openPTY(t)
	tty, rc := runOn(t, ptm, pts, "client", "renewal", "-s", "LS")
	lines = strings.Split(strings.TrimSuffix(tty, "\n"), "\n")
	if rc != 0 || len(lines) < len(recs) {
		t.Fatalf("tty rc %d:\n%s", rc, tty)
	}
	bar := regexp.MustCompile(`^(timestamp=\d+ read_ms=(-?\d+) write_ms=(-?\d+) next_timeouts=\d+ next_errors=\d+)  ` +
		`\|[ ▏▎▍▌▋▊▉█]{20}\| +(\d+) ms of 1 s +\d+\.\d%( over)?( then \d+ failed)?$`)
	for i, l := range lines {
		m := bar.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("tty line %d has no bar: %q", i, l)
			continue
		}
		if i < len(recs) && m[1] != recs[i].Text {
			t.Errorf("tty line %d: %q, want the record %q first", i, m[1], recs[i].Text)
		}
		var r, w, ms int64
		fmt.Sscan(m[2], &r)
		fmt.Sscan(m[3], &w)
		fmt.Sscan(m[4], &ms)
		if ms != max(r, 0)+max(w, 0) {
			t.Errorf("tty line %d: %d ms, want read+write", i, ms)
		}
	}

	// --json is the same on a terminal: no bars.
	js, rc := runOn(t, ptm, pts, "client", "renewal", "-s", "LS", "--json")
	if rc != 0 || strings.Contains(js, "|") {
		t.Errorf("renewal --json on a tty: rc %d\n%s", rc, js)
	}
	checkJSON(t, "renewal", js)
}
