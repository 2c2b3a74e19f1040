package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// timeline records events on the host's clock, from every guest and from
// the scenario itself, and writes them to the scenario's results.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	events []event
}

// event is one line of a timeline.
type event struct {
	At    time.Time
	Guest string
	What  string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

// add records what happened on guest now.
func (t *timeline) add(guest, what string) time.Time {
	now := time.Now()
	t.mu.Lock()
	t.events = append(t.events, event{At: now, Guest: guest, What: what})
	t.mu.Unlock()
	return now
}

// find returns the first event of guest whose text starts with prefix.
func (t *timeline) find(guest, prefix string) (event, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if e.Guest == guest && strings.HasPrefix(e.What, prefix) {
			return e, true
		}
	}
	return event{}, false
}

// count returns the number of events whose text starts with prefix.
func (t *timeline) count(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.events {
		if strings.HasPrefix(e.What, prefix) {
			n++
		}
	}
	return n
}

// write saves the timeline as lines "+seconds guest what".
func (t *timeline) write(path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# start %s (host clock)\n", t.start.UTC().Format(time.RFC3339Nano))
	for _, e := range t.events {
		fmt.Fprintf(&b, "%+9.3f %-4s %s\n", e.At.Sub(t.start).Seconds(), e.Guest, e.What)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// labConfig is what every guest of a run shares.
type labConfig struct {
	Repo    string // the repository, shared read-only as tag "lab"
	Cache   string // scripts/lab-kernel.sh's output: vmlinuz, initrd.img
	Trees   string // the Debian trees
	Qemu    string // qemu-system-x86_64
	MemMB   int
	Verbose bool
	// GuestArgs, when set, gives more QEMU arguments for the guest named.
	GuestArgs func(name string) []string
}

// guest is one QEMU virtual machine of a scenario.
type guest struct {
	name string
	cfg  *labConfig
	tl   *timeline
	dir  string // results of this guest: console, daemon logs (share "out")
	run  string // sockets
	cmd  *exec.Cmd
	mon  *qmp
	exit chan struct{}

	amu     sync.Mutex
	agent   net.Conn
	nextID  uint64
	waiting map[uint64]chan agentReply
}

type agentReply struct {
	ID  uint64 `json:"id"`
	RC  int    `json:"rc"`
	Out string `json:"out"`
}

// startGuest boots a guest with the Debian tree tree as its root, disk as
// its shared virtio disk (/dev/vda) and an i6300esb watchdog whose firing
// resets it.
func startGuest(cfg *labConfig, tl *timeline, name, tree, disk, resultDir string) (*guest, error) {
	g := &guest{name: name, cfg: cfg, tl: tl, dir: filepath.Join(resultDir, name), exit: make(chan struct{}),
		waiting: map[uint64]chan agentReply{}}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	run, err := os.MkdirTemp("", "gosanlock-lab-"+name+"-")
	if err != nil {
		return nil, err
	}
	g.run = run
	fs := func(id, path, extra string) []string {
		return []string{"-fsdev", "local,id=" + id + ",path=" + path + ",security_model=none" + extra,
			"-device", "virtio-9p-pci,fsdev=" + id + ",mount_tag=" + id}
	}
	args := []string{
		"-name", name, "-nodefaults", "-display", "none", "-accel", "tcg",
		"-m", fmt.Sprint(cfg.MemMB), "-smp", "1",
		"-kernel", filepath.Join(cfg.Cache, "vmlinuz"),
		"-initrd", filepath.Join(cfg.Cache, "initrd.img"),
		"-append", "console=ttyS0 panic=-1 lab.name=" + name,
		"-serial", "file:" + filepath.Join(g.dir, "console.log"),
		"-qmp", "unix:" + filepath.Join(run, "qmp.sock") + ",server=on,wait=off",
		"-chardev", "socket,id=agent,path=" + filepath.Join(run, "agent.sock") + ",server=on,wait=off",
		"-device", "virtio-serial-pci", "-device", "virtserialport,chardev=agent,name=lab.agent",
		"-drive", "if=none,id=shared,file=" + disk + ",format=raw,cache=none,file.locking=off",
		"-device", "virtio-blk-pci,drive=shared,id=shared-dev",
		"-device", "i6300esb", "-action", "watchdog=reset",
	}
	args = append(args, fs("root", tree, ",readonly=on")...)
	args = append(args, fs("lab", cfg.Repo, ",readonly=on")...)
	args = append(args, fs("out", g.dir, "")...)
	if cfg.GuestArgs != nil {
		args = append(args, cfg.GuestArgs(name)...)
	}
	g.cmd = exec.Command(cfg.Qemu, args...)
	qlog, err := os.Create(filepath.Join(g.dir, "qemu.log"))
	if err != nil {
		g.cleanup()
		return nil, err
	}
	g.cmd.Stdout = qlog
	g.cmd.Stderr = qlog
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		qlog.Close()
		g.cleanup()
		return nil, err
	}
	go func() {
		_ = g.cmd.Wait()
		qlog.Close()
		close(g.exit)
	}()
	tl.add(name, fmt.Sprintf("qemu started (pid %d, tree %s)", g.cmd.Process.Pid, filepath.Base(tree)))
	g.mon, err = dialQMP(filepath.Join(run, "qmp.sock"), time.Now().Add(20*time.Second), g.onEvent)
	if err != nil {
		g.stop()
		return nil, err
	}
	if err := g.connectAgent(); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// onEvent records QMP events on the timeline.
func (g *guest) onEvent(at time.Time, name string, data json.RawMessage) {
	what := "qmp " + name
	if len(data) > 0 && name != "RTC_CHANGE" {
		what += " " + string(data)
	}
	g.tl.mu.Lock()
	g.tl.events = append(g.tl.events, event{At: at, Guest: g.name, What: what})
	g.tl.mu.Unlock()
}

// connectAgent connects to the agent's socket and reads its replies.
func (g *guest) connectAgent() error {
	conn, err := net.Dial("unix", filepath.Join(g.run, "agent.sock"))
	if err != nil {
		return fmt.Errorf("%s agent: %w", g.name, err)
	}
	g.agent = conn
	go func() {
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var r agentReply
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			g.amu.Lock()
			ch := g.waiting[r.ID]
			delete(g.waiting, r.ID)
			g.amu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}()
	return nil
}

// errTimeout is returned by sh when the guest did not answer in time.
var errTimeout = errors.New("no answer from the guest")

// sh runs a shell command in the guest and returns its output and exit
// code; the command is killed in the guest after timeout.
func (g *guest) sh(timeout time.Duration, command string) (string, int, error) {
	ch := make(chan agentReply, 1)
	g.amu.Lock()
	g.nextID++
	id := g.nextID
	g.waiting[id] = ch
	g.amu.Unlock()
	b, err := json.Marshal(map[string]any{"id": id, "cmd": command, "timeout_ms": timeout.Milliseconds()})
	if err != nil {
		return "", -1, err
	}
	if g.cfg.Verbose {
		fmt.Fprintf(os.Stderr, "lab: %s$ %s\n", g.name, command)
	}
	if _, err := g.agent.Write(append(b, '\n')); err != nil {
		return "", -1, err
	}
	select {
	case r := <-ch:
		if g.cfg.Verbose {
			fmt.Fprintf(os.Stderr, "lab: %s rc %d: %s\n", g.name, r.RC, strings.TrimSpace(r.Out))
		}
		return r.Out, r.RC, nil
	case <-time.After(timeout + 5*time.Second):
		g.amu.Lock()
		delete(g.waiting, id)
		g.amu.Unlock()
		return "", -1, fmt.Errorf("%s: %q: %w", g.name, command, errTimeout)
	case <-g.exit:
		return "", -1, fmt.Errorf("%s: %q: qemu exited", g.name, command)
	}
}

// waitAgent waits until the guest's agent answers (after boot or reset).
func (g *guest) waitAgent(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !interrupted.Load() {
		if _, rc, err := g.sh(2*time.Second, "true"); err == nil && rc == 0 {
			g.tl.add(g.name, "agent ready")
			return nil
		}
		select {
		case <-g.exit:
			return fmt.Errorf("%s: qemu exited while booting", g.name)
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("%s: agent not up after %v", g.name, limit)
}

// hang makes every request the guest issues to the shared disk from now on
// wait in QEMU's throttle queue, so that its processes sit in D state on
// them. The guest is paused for it (QMP stop, which completes the requests
// in flight first), the drive throttled to 1 byte/s, and the one request
// that QEMU's leaky bucket lets through after a new limit is spent by the
// host itself (HMP "qemu-io shared", a read of 4 KiB through the same
// BlockBackend; it passes, since nothing else can be queued before it,
// and the command returns), before the guest runs again: the guest's
// first request then finds the bucket 4096 bytes full and waits about
// 4096 s, and every later one queues behind it. resetHungHolder checks
// that a read the guest issues after the hang does not complete.
func (g *guest) hang() error {
	if _, err := g.mon.command("stop", nil); err != nil {
		return err
	}
	err := g.setThrottle(1)
	var out string
	if err == nil {
		var raw []byte
		raw, err = g.mon.command("human-monitor-command", map[string]any{"command-line": `qemu-io shared "read 0 4096"`})
		if err == nil {
			// qemu-io prints its result on QEMU's standard output
			// (qemu.log); the reply holds only an error, such as an unknown
			// device.
			_ = json.Unmarshal(raw, &out)
			if strings.TrimSpace(out) != "" {
				err = fmt.Errorf("%s: qemu-io: %s", g.name, strings.TrimSpace(out))
			}
		}
	}
	if _, cerr := g.mon.command("cont", nil); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		g.tl.add(g.name, "storage hung (paused, throttled to 1 B/s, the bucket's first pass spent by the host)")
	}
	return err
}

// unhang lifts the throttle: the queued requests go through, which is
// storage coming back.
func (g *guest) unhang() error {
	err := g.setThrottle(0)
	if err == nil {
		g.tl.add(g.name, "storage back (throttle lifted)")
	}
	return err
}

// setThrottle limits the guest's path to the shared disk to bytesPerSec
// (no limit on requests per second); 0 lifts the limit.
func (g *guest) setThrottle(bytesPerSec int) error {
	_, err := g.mon.command("block_set_io_throttle", map[string]any{
		"device": "shared", "bps": bytesPerSec, "bps_rd": 0, "bps_wr": 0,
		"iops": 0, "iops_rd": 0, "iops_wr": 0,
	})
	return err
}

// stop ends the guest: QMP quit, then SIGKILL to its pid if it is still
// there after 10 s; its sockets are removed.
func (g *guest) stop() {
	if g.mon != nil {
		_, _ = g.mon.command("quit", nil)
	}
	select {
	case <-g.exit:
	case <-time.After(10 * time.Second):
		if g.cmd != nil && g.cmd.Process != nil {
			_ = g.cmd.Process.Kill()
			<-g.exit
		}
	}
	if g.mon != nil {
		g.mon.close()
	}
	if g.agent != nil {
		g.agent.Close()
	}
	g.tl.add(g.name, "qemu stopped")
	g.cleanup()
}

func (g *guest) cleanup() {
	if g.run != "" {
		os.RemoveAll(g.run)
	}
}
