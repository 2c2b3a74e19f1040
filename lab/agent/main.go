// Command lab-agent runs inside a lab guest (lab/guest/init starts it) and
// executes the shell commands the host sends over a virtio-serial port.
//
// Each request is one JSON line {"id", "cmd", "timeout_ms"}; the agent
// runs the command with /bin/sh -c in its own process group, its standard
// output and error going to a temporary file (so that a command that
// leaves a process in the background still finishes), and answers one
// JSON line {"id", "rc", "out"}. Requests run concurrently: a command that
// blocks on hung storage does not hold up the others. A command past its
// timeout is killed with its process group and answers rc -1.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// request is one command from the host.
type request struct {
	ID        uint64 `json:"id"`
	Cmd       string `json:"cmd"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// reply is the result of one request.
type reply struct {
	ID  uint64 `json:"id"`
	RC  int    `json:"rc"`
	Out string `json:"out"`
}

// maxOut bounds the output returned for one command.
const maxOut = 1 << 20

func main() {
	port := flag.String("port", "", "virtio-serial port device")
	flag.Parse()
	f, err := os.OpenFile(*port, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab-agent: %v\n", err)
		os.Exit(1)
	}
	defer f.Close()
	var wmu sync.Mutex
	enc := json.NewEncoder(f)
	send := func(r reply) {
		wmu.Lock()
		defer wmu.Unlock()
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(os.Stderr, "lab-agent: reply %d: %v\n", r.ID, err)
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "lab-agent: bad request: %v\n", err)
			continue
		}
		go func() { send(run(req)) }()
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "lab-agent: read: %v\n", err)
		os.Exit(1)
	}
}

// run executes one request and returns its reply.
func run(req request) reply {
	out, err := os.CreateTemp("", "lab-agent-out-")
	if err != nil {
		return reply{ID: req.ID, RC: -1, Out: err.Error()}
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command("/bin/sh", "-c", req.Cmd)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return reply{ID: req.ID, RC: -1, Out: err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Minute
	}
	rc := 0
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			rc = ee.ExitCode()
		default:
			rc = -1
		}
	case <-timer.C:
		// The whole group: the shell and what it started in the foreground.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		rc = -1
	}
	b := make([]byte, maxOut)
	n, _ := out.ReadAt(b, 0)
	text := string(b[:n])
	if rc == -1 && err == nil {
		text += fmt.Sprintf("\nlab-agent: timed out after %v", timeout)
	}
	return reply{ID: req.ID, RC: rc, Out: text}
}
