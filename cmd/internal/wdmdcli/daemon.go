package wdmdcli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/gosanlock/gosanlock/internal/sdnotify"
	"github.com/gosanlock/gosanlock/wdmd/server"
)

// daemonEnv marks the re-executed child that becomes the daemon.
const daemonEnv = "GOSANLOCK_WDMD_DAEMON"

// daemon forks unless told not to, then runs the daemon (package
// wdmd/server) with o's settings; it returns the exit status.
func daemon(o *options, stderr io.Writer) int {
	// Under a systemd Type=notify unit stay the process systemd started.
	if !o.foreground && os.Getenv(daemonEnv) == "" && !sdnotify.Active() {
		return fork(stderr)
	}
	log := newLogger("wdmd", o.foreground, stderr)
	defer log.close()
	err := server.Run(server.Config{
		RunDir:        o.runDir,
		Marker:        o.marker,
		Group:         o.group,
		HighPriority:  o.highPriority,
		AllowScripts:  o.allowScripts,
		ScriptDir:     o.scriptDir,
		KillScriptSec: o.killScriptSec,
		Device:        o.device,
		TestInterval:  o.testInterval,
		GridOnly:      o.gridOnly,
		TraceRecords:  o.trace,
		Driver:        o.driver(),
		Log:           log.zapLogger(),
		HandleSignals: true,
	})
	if err != nil {
		return 255
	}
	return 0
}

// fork starts the daemon as a new session leader with stdio on /dev/null
// and cwd /, and returns 0 at once, like daemon(3) in the parent.
func fork(stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "cannot fork daemon")
		return 1
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "cannot fork daemon")
		return 1
	}
	_ = cmd.Process.Release()
	return 0
}
