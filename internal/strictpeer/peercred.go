package strictpeer

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read returns the identity the kernel recorded at connect for the socket
// rc. pid is the peer pid already known (the identity's pid when the
// credentials cannot be read: Known is then false).
func Read(rc syscall.RawConn, pid int) Identity {
	id := Identity{Pid: pid, UID: -1, GID: -1}
	if rc == nil {
		return id
	}
	_ = rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return
		}
		id.Pid, id.UID, id.GID, id.Known = int(cred.Pid), int(cred.Uid), int(cred.Gid), true
		id.Groups = peerGroups(int(fd))
	})
	return id
}

// peerGroups returns the peer's supplementary groups (Linux 4.13+), or
// nil when the kernel cannot tell.
func peerGroups(fd int) []int {
	n := 64
	for range 2 {
		buf := make([]uint32, n)
		l := uint32(4 * n)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e == unix.ERANGE {
			n = int(l/4) + 1
			continue
		}
		if e != 0 {
			return nil
		}
		out := make([]int, 0, l/4)
		for _, g := range buf[:l/4] {
			out = append(out, int(g))
		}
		return out
	}
	return nil
}
