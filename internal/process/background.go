package process

import (
	"os"
	"os/exec"
	"syscall"
)

// Background is the daemon's "fork and let the parent exit" (docs/cli.md
// "Startup" step 2) for a Go program, which cannot fork: it starts the same
// executable with the same arguments, stdio on /dev/null, in a new session,
// with env=1 added to its environment so that the child knows it is the
// background one. The caller exits 0 once it returns nil.
func Background(env string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = cmd.Process.Release()
	return nil
}
