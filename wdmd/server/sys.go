package server

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wdmd"
)

// HighPriority applies -H 1: lock memory and use SCHED_RR at the maximum
// priority with reset-on-fork (scripts run normally). Failures are only
// logged.
func HighPriority(log *zap.Logger) {
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
		log.Error("mlockall failed")
	}
	const schedRR, resetOnFork = 2, 0x40000000
	prio, _, e := unix.Syscall(unix.SYS_SCHED_GET_PRIORITY_MAX, schedRR, 0, 0)
	if e != 0 {
		log.Error(fmt.Sprintf("could not get max scheduler priority err %d", -int(e)))
		return
	}
	param := struct{ prio int32 }{int32(prio)}
	if _, _, e := unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, 0, schedRR|resetOnFork, uintptr(unsafe.Pointer(&param))); e != 0 {
		log.Error(fmt.Sprintf("could not set RR|RESET_ON_FORK priority %d err %d", prio, -int(e)))
	}
}

// ExecRunner is the wdmd.ScriptRunner of the real daemon: it runs script
// tests as child processes.
type ExecRunner struct{}

func (ExecRunner) ReadDir(dir string) ([]wdmd.ScriptEntry, error) {
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	var out []wdmd.ScriptEntry
	for _, e := range ents {
		se := wdmd.ScriptEntry{Name: e.Name()}
		if fi, err := os.Stat(dir + "/" + e.Name()); err == nil {
			se.Regular = fi.Mode().IsRegular()
			se.OwnerExec = fi.Mode().Perm()&0o100 != 0
		}
		out = append(out, se)
	}
	return out, nil
}

func (ExecRunner) Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o100 == 0 {
		return unix.EACCES
	}
	return nil
}

func (ExecRunner) Start(path string) (int, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	p, err := os.StartProcess(path, []string{path}, &os.ProcAttr{
		Files: []*os.File{null, null, null},
		Sys:   &syscall.SysProcAttr{},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	_ = p.Release()
	return pid, nil
}

func (ExecRunner) Reap(pid int) (bool, wdmd.ScriptStatus) {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	if err != nil {
		// not our child any more: count it as finished and failed
		return true, wdmd.ScriptStatus{Exited: true, Code: 255}
	}
	if got == 0 {
		return false, wdmd.ScriptStatus{}
	}
	if ws.Signaled() {
		return true, wdmd.ScriptStatus{Signaled: true, Signal: int(ws.Signal())}
	}
	return true, wdmd.ScriptStatus{Exited: true, Code: ws.ExitStatus()}
}

func (ExecRunner) Kill(pid int) { _ = unix.Kill(pid, unix.SIGKILL) }
