package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// HostOptions are the settings of one host (AddHostWith). The zero value
// is what AddHost uses: the cluster's daemon arguments and no watchdog.
type HostOptions struct {
	// DaemonArgs are appended after the cluster's Options.DaemonArgs (for
	// example "-g", "3").
	DaemonArgs []string
	// Env is added to the daemon's environment only.
	Env []string
	// SanlockConf, when set, is written to the host directory as
	// sanlock.conf and named by SANLOCK_CONFIG_FILE in the daemon's
	// environment (read by our daemon; the C binary 3.8.5 reads
	// /etc/sanlock/sanlock.conf only). A C395 or C511 host gets it at its
	// tree's /etc/sanlock/sanlock.conf, or TreeSanlockConf without it.
	// Example: "watchdog_fire_timeout = 20\n".
	SanlockConf string
	// Watchdog, when set, gives the host its own wdmd process with an
	// emulated watchdog device, and the daemon runs with -w 1. Go hosts
	// only: the C sanlock has the wdmd socket path compiled in.
	Watchdog *WatchdogOptions
	// SyncDIO mounts the host's view without asynchronous direct I/O
	// (fusefault.Options.SyncDIO): a hung request holds the daemon's
	// thread inside io_submit until the storage answers.
	SyncDIO bool
}

// WatchdogOptions configure a host's own watchdog: a testdev.Bank served
// by the test process (so its timer keeps running whatever happens to the
// host's processes) and our wdmd (cmd/wdmd) using it.
type WatchdogOptions struct {
	// WdmdBinary is our wdmd (BuildEscalation).
	WdmdBinary string
	// FireAfter is how long the armed device may go without a ping before
	// it fires (testdev.Options.FireAfter; 0: the 60 s it reports).
	FireAfter time.Duration
	// TestInterval is wdmd's --test-interval (0: its default, 10).
	TestInterval int
	// ResetOnFire emulates the host reset when the device fires: Kill.
	ResetOnFire bool
	// OnFire, when set, is called with the fire event (before the reset).
	OnFire func(h *Host, ev testdev.Event)
}

// hostWatchdog is the watchdog state of a host with HostOptions.Watchdog.
type hostWatchdog struct {
	opts   WatchdogOptions
	dir    string // run dir of wdmd: socket, pid file, crash marker, device socket
	bank   *testdev.Bank
	srv    *testdev.Server
	wdmd   *Proc
	starts int
}

// AddHostWith is AddHost with per-host settings.
func (c *Cluster) AddHostWith(kind Kind, name string, o HostOptions) (*Host, error) {
	if o.Watchdog != nil && kind != Go {
		return nil, fmt.Errorf("harness: %s: a watchdog needs a Go host (the C sanlock uses the fixed /run/wdmd)", name)
	}
	if o.Watchdog != nil && o.Watchdog.WdmdBinary == "" {
		return nil, errors.New("harness: WatchdogOptions.WdmdBinary is needed")
	}
	return c.addHost(kind, name, o)
}

// BuildEscalation builds our wdmd (cmd/wdmd) and the escalation tests
// holder (testdisk/harness/escalationholder) into dir, like Build.
func BuildEscalation(dir string) (wdmd, holder string, err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", "", fmt.Errorf("not inside the gosanlock module")
	}
	wdmd = filepath.Join(dir, "wdmd")
	holder = filepath.Join(dir, "escalationholder")
	// wdmd with -tags wdmd_testdev: the production binary cannot use the
	// emulated watchdog (--test-device).
	for _, b := range [][3]string{{wdmd, "./cmd/wdmd", "wdmd_testdev"}, {holder, "./testdisk/harness/escalationholder", ""}} {
		cmd := exec.Command("go", "build", "-tags", b[2], "-o", b[0], b[1])
		cmd.Dir = filepath.Dir(gomod)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v: %s", b[1], err, out)
		}
	}
	return wdmd, holder, nil
}

// setupHost prepares the per-host files and the watchdog device (at
// AddHostWith, before the first Start).
func (h *Host) setupHost() error {
	conf := h.opts.SanlockConf
	if conf == "" && h.tree != nil {
		conf = TreeSanlockConf
	}
	if conf != "" {
		if err := os.WriteFile(h.confPath(), []byte(conf), 0o644); err != nil {
			return err
		}
	}
	wo := h.opts.Watchdog
	if wo == nil {
		return nil
	}
	wd := &hostWatchdog{opts: *wo, dir: filepath.Join(h.Dir, "wdmd")}
	if err := os.Mkdir(wd.dir, 0o700); err != nil {
		return err
	}
	wd.bank = testdev.NewBank(testdev.Options{
		FireAfter: wo.FireAfter,
		OnFire: func(ev testdev.Event) {
			h.c.Logf("%s: watchdog fired at %.3f (host reset)", h.Name, ev.At.Seconds())
			if wo.OnFire != nil {
				wo.OnFire(h, ev)
			}
			if wo.ResetOnFire {
				go h.Kill()
			}
		},
	})
	srv, err := wd.bank.Serve(filepath.Join(wd.dir, "dev.sock"))
	if err != nil {
		return err
	}
	wd.srv = srv
	h.wd = wd
	return nil
}

// daemonCommand is the daemon's argv (without the binary) and the extra
// environment it gets (for a tree host: all of its environment besides
// SANLOCK_RUN_DIR and SANLOCK_PRIVILEGED).
func (h *Host) daemonCommand() (args, env []string) {
	w := "0"
	if h.wd != nil {
		w = "1"
		env = append(env, "SANLOCK_WDMD_SOCKET="+h.WdmdSocket())
	}
	args = append([]string{"daemon", "-D", "-w", w, "-l", "0", "-U", "root", "-G", "root", "-e", h.Name},
		h.c.opts.DaemonArgs...)
	args = append(args, h.opts.DaemonArgs...)
	// Logs stay in the host's directory: ours through SANLOCK_LOG_FILE;
	// the C daemons' log file path is fixed, so they write none (their -D
	// output is in daemon.N.log).
	if h.Kind.IsC() {
		args = append(args, "-L", "-1")
	}
	if h.tree != nil {
		return args, h.opts.Env
	}
	env = append(env, "SANLOCK_LOG_FILE="+filepath.Join(h.Dir, "sanlock.log"))
	if h.opts.SanlockConf != "" {
		env = append(env, "SANLOCK_CONFIG_FILE="+filepath.Join(h.Dir, "sanlock.conf"))
	}
	return args, append(env, h.opts.Env...)
}

// Watchdog returns the host's emulated watchdog device bank (nil without
// HostOptions.Watchdog). Its events carry CLOCK_MONOTONIC times.
func (h *Host) Watchdog() *testdev.Bank {
	if h.wd == nil {
		return nil
	}
	return h.wd.bank
}

// WdmdSocket is the socket of the host's wdmd ("" without a watchdog).
func (h *Host) WdmdSocket() string {
	if h.wd == nil {
		return ""
	}
	return filepath.Join(h.wd.dir, "wdmd.sock")
}

// Wdmd returns the host's current wdmd process (nil without a watchdog).
func (h *Host) Wdmd() *Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wd == nil {
		return nil
	}
	return h.wd.wdmd
}

// WdmdLog is the log file of the host's current wdmd (-D output).
func (h *Host) WdmdLog() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wd == nil {
		return ""
	}
	return filepath.Join(h.Dir, fmt.Sprintf("wdmd.%d.log", h.wd.starts))
}

// DaemonLog is the log file of the current daemon (-D output).
func (h *Host) DaemonLog() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return filepath.Join(h.Dir, fmt.Sprintf("daemon.%d.log", h.starts))
}

// startWdmd starts the host's wdmd unless it runs, and waits until it has
// found the device and listens. A wdmd that is gone (host reset) is
// replaced after the emulated reboot: its crash marker is removed.
func (h *Host) startWdmd() error {
	wd := h.wd
	if wd == nil {
		return nil
	}
	h.mu.Lock()
	if wd.wdmd != nil && !wd.wdmd.Exited() {
		h.mu.Unlock()
		return nil
	}
	wd.starts++
	logPath := filepath.Join(h.Dir, fmt.Sprintf("wdmd.%d.log", wd.starts))
	h.mu.Unlock()
	marker := filepath.Join(wd.dir, "shm-wdmd")
	_ = os.Remove(marker) // a new boot
	_ = os.Remove(filepath.Join(wd.dir, "wdmd.sock"))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", "-G", "root", "--run-dir", wd.dir, "--shm-marker", marker,
		"--test-device", filepath.Join(wd.dir, "dev.sock")}
	if wd.opts.TestInterval > 0 {
		args = append(args, "--test-interval", strconv.Itoa(wd.opts.TestInterval))
	}
	cmd := exec.Command(wd.opts.WdmdBinary, args...)
	cmd.Dir = h.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p, err := startProc(cmd, h.Name+" wdmd")
	if err != nil {
		return fmt.Errorf("harness: %s: start wdmd: %w", h.Name, err)
	}
	h.mu.Lock()
	wd.wdmd = p
	h.mu.Unlock()
	h.c.Logf("%s: wdmd pid %d, socket %s", h.Name, p.PID(), h.WdmdSocket())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p.Exited() {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("harness: %s: wdmd exited: %v: %s", h.Name, p.err, log)
		}
		log, _ := os.ReadFile(logPath)
		// The device is found (probed) at start and armed when the first
		// lockspace asks for it (docs/wdmd.md "Opening the device on demand").
		if _, err := os.Stat(h.WdmdSocket()); err == nil && strings.Contains(string(log), "gettimeout reported") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: %s: wdmd did not find the device: %s", h.Name, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killWdmd kills the host's wdmd (part of the host's death): the device
// gets an unclean close and keeps its timer.
func (h *Host) killWdmd() {
	p := h.Wdmd()
	if p == nil {
		return
	}
	p.Signal(syscall.SIGCONT)
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// signalWdmd sends sig to the host's wdmd (Pause/Resume: a frozen machine
// freezes wdmd too, while the device keeps counting).
func (h *Host) signalWdmd(sig syscall.Signal) {
	if p := h.Wdmd(); p != nil {
		p.Signal(sig)
	}
}

// closeWatchdog stops serving the device and stops its timer (Close).
func (h *Host) closeWatchdog() error {
	if h.wd == nil {
		return nil
	}
	err := h.wd.srv.Close()
	h.wd.bank.Stop()
	return err
}
