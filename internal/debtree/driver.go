package debtree

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Result is one line printed by the driver program (NewerDriver): the
// call's name, its return value and the fields it returned.
type Result struct {
	Call   string
	RV     int
	Fields map[string]string
	Line   string
}

// Field returns the named field as a number (0 when missing; hex with 0x).
func (r Result) Field(name string) uint64 {
	v, _ := strconv.ParseUint(r.Fields[name], 0, 64)
	return v
}

// ParseResult parses one line of the driver's output.
func ParseResult(line string) (Result, error) {
	line = strings.TrimSpace(line)
	w := strings.Fields(line)
	r := Result{Line: line, Fields: map[string]string{}}
	if len(w) < 2 || !strings.HasPrefix(w[1], "rv=") {
		return r, fmt.Errorf("driver line %q: no rv", line)
	}
	r.Call = w[0]
	rv, err := strconv.Atoi(strings.TrimPrefix(w[1], "rv="))
	if err != nil {
		return r, fmt.Errorf("driver line %q: %v", line, err)
	}
	r.RV = rv
	for _, f := range w[2:] {
		k, v, _ := strings.Cut(f, "=")
		r.Fields[k] = v
	}
	return r, nil
}

// Driver is a running driver program taking calls on its stdin (so that
// a registered connection lives across calls), started by StartDriver.
type Driver struct {
	Tree  *Tree
	Pid   int
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

// StartDriver compiles NewerDriver and starts it in the tree with runDir
// at its /run (the run directory of a daemon from StartDaemon), reading
// calls from its stdin. At cleanup its stdin is closed (it exits, and the
// daemon sees the registered client die) and it is killed by pid after
// 5 s if still there.
func (tr *Tree) StartDriver(t testing.TB, runDir string) *Driver {
	t.Helper()
	prog := tr.NewerDriver(t)
	cmd := tr.Command(&Options{RunDir: runDir, Env: []string{"SANLOCK_RUN_DIR=" + DaemonRunDir}}, prog, "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Driver{Tree: tr, Pid: cmd.Process.Pid, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// Call sends one call (the words of one input line) and returns the
// line the driver printed for it, waiting up to timeout (0: 2 minutes;
// an acquire that finds a live owner takes about 30 s).
func (d *Driver) Call(t testing.TB, timeout time.Duration, args ...string) Result {
	t.Helper()
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if _, err := fmt.Fprintln(d.stdin, strings.Join(args, " ")); err != nil {
		t.Fatalf("driver %v: %v", args, err)
	}
	select {
	case line, ok := <-d.lines:
		if !ok {
			t.Fatalf("driver %v: exited", args)
		}
		r, err := ParseResult(line)
		if err != nil {
			t.Fatal(err)
		}
		return r
	case <-time.After(timeout):
		t.Fatalf("driver %v: no answer in %v", args, timeout)
	}
	return Result{}
}

// CallOnce runs the driver once for one call (a new process: no
// registered connection) with runDir at the tree's /run.
func (tr *Tree) CallOnce(t testing.TB, runDir string, args ...string) Result {
	t.Helper()
	out, err := tr.RunC(t, runDir, append([]string{tr.NewerDriver(t)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseResult(out)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Trace runs args in the tree like RunC, under the tree's strace, and
// returns the program's stdout and, for each connection it made to a
// socket named sanlock.sock, every byte it sent there (in order). It is
// how the requests of libsanlock are compared with ours
// (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
func (tr *Tree) Trace(t testing.TB, runDir string, args ...string) (string, [][]byte) {
	t.Helper()
	name := fmt.Sprintf("debtree-strace-%d-%d", os.Getpid(), ccSeq.Add(1))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(runDir, name)
	defer os.Remove(log)
	st := append([]string{"strace", "-f", "-xx", "-s", "1000000", "-e", "trace=connect,sendto,sendmsg,write,close",
		"-e", "signal=none", "-o", "/run/" + name}, args...)
	out, err := tr.RunC(t, runDir, st...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return out, parseSends(string(b))
}

var (
	straceConnect = regexp.MustCompile(`connect\((\d+), \{sa_family=AF_UNIX, sun_path="((?:\\x[0-9a-f]{2})*)"`)
	straceSend    = regexp.MustCompile(`(?:sendto|write)\((\d+), "((?:\\x[0-9a-f]{2})*)"`)
	straceClose   = regexp.MustCompile(`^(?:\d+ +)?close\((\d+)\)`)
)

// unhex decodes strace's -xx string form.
func unhex(s string) []byte {
	b, _ := hex.DecodeString(strings.ReplaceAll(s, `\x`, ""))
	return b
}

// parseSends collects, per connection to sanlock.sock, the bytes sent
// (one process's descriptors; a descriptor connected again starts a new
// connection).
func parseSends(log string) [][]byte {
	var conns [][]byte
	open := map[string]int{} // fd -> index in conns
	for _, l := range strings.Split(log, "\n") {
		if m := straceConnect.FindStringSubmatch(l); m != nil {
			if strings.HasSuffix(string(unhex(m[2])), "/sanlock.sock") {
				open[m[1]] = len(conns)
				conns = append(conns, nil)
			} else {
				delete(open, m[1])
			}
			continue
		}
		if m := straceClose.FindStringSubmatch(l); m != nil {
			delete(open, m[1])
			continue
		}
		if m := straceSend.FindStringSubmatch(l); m != nil {
			if i, ok := open[m[1]]; ok {
				conns[i] = append(conns[i], unhex(m[2])...)
			}
		}
	}
	return conns
}
