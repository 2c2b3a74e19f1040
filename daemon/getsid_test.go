package daemon

import "golang.org/x/sys/unix"

func getsid(pid int) (int, error) { return unix.Getsid(pid) }
