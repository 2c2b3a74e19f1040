package newerinterop

import (
	"encoding/hex"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

func sector(t *testing.T, path string, hostID int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := b[(hostID-1)*512 : (hostID-1)*512+200]
	return hex.EncodeToString(s)
}

func rawx(t *testing.T, sock string, req []byte) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(req)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	t.Logf("raw reply %d bytes err %v: %s", len(b), err, hex.EncodeToString(b))
}

func TestZProbe(t *testing.T) {
	tr := debtree.Get(t, "sid")
	real := tr.StartDaemon(t, "", "-e", "real")
	sock := real.SocketPath()
	files := leaseFiles(t, "ls", "ls2", "ls3", "r")
	ls, ls2, ls3, rf := files[0], files[1], files[2], files[3]
	x := func(what string, req []byte) reply {
		t.Logf("== %s", what)
		return exchange(t, sock, req, 10*time.Second)
	}
	x("write ls", request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, ls, 0)))
	x("write ls2", request(cmdWriteLockspace, 0, 0, 0, lockspace("ls2", 0, 0, ls2, 0)))
	x("init h7 both", request(cmdInitLSHost, 0x3, 0, 20, lockspace("ls1", 7, 0, ls, 0), leaderRec(7, 1, "seven", 55)))
	t.Logf("sector7 %s", sector(t, ls, 7))
	x("init h8 flags 0x4", request(cmdInitLSHost, 0x4, 0, 20, lockspace("ls1", 8, 0, ls, 0), leaderRec(8, 1, "eight", 55)))
	t.Logf("sector8 %s", sector(t, ls, 8))
	x("read h7", request(cmdReadLSHost, 0, 0, 0, lockspace("", 7, 0, ls, 0)))
	x("LS_FLAGS 0x110 empty area", request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls3x", 0, 0x110, rf, 0)))
	t.Logf("rf s1 %s", sector(t, rf, 1))
	t.Logf("rf s2 %s", sector(t, rf, 2))
	x("LS_FLAGS 0x114 wrong name", request(cmdWriteLockspace, 0x1, 0, 0, lockspace("zz", 0, 0x114, ls2, 0)))
	t.Logf("ls2 s1 %s", sector(t, ls2, 1))
	x("LS_FLAGS 0x214 4k", request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x214, ls2, 0)))
	t.Logf("ls2 s1 %s", sector(t, ls2, 1))
	x("LS_FLAGS 0x110 restore", request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x110, ls2, 0)))
	x("read_ls_host ls3 (empty)", request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, ls3, 0)))
	x("read_ls_host wrong name", request(cmdReadLSHost, 0, 0, 0, lockspace("qq", 1, 0, ls, 0)))
	// unknown lockspace cases
	rawx(t, sock, request(cmdGetHosts, 0x1, 0, 0, lockspace("nope", 0, 0, "", 0)))
	x("set_config io unknown", request(cmdSetConfig, 0, 0x10, 10, lockspace("nope", 0, 0, "", 0)))
	// add with NO_WATCHDOG (this daemon runs -w 0)
	x("write ls1 again", request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, ls, 0)))
	st := time.Now()
	x("add NO_WATCHDOG|NODELAY", request(cmdAddLockspace, 0x6, 0, 0, lockspace("ls1", 1, 0, ls, 0)))
	t.Logf("took %v", time.Since(st))
	rawx(t, sock, request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 0, 0, "", 0)))
	rawx(t, sock, request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 7, 0, "", 0)))
	x("set_config io 0", request(cmdSetConfig, 0, 0x10, 0, lockspace("ls1", 0, 0, "", 0)))
	x("set_config io 5", request(cmdSetConfig, 0, 0x10, 5, lockspace("ls1", 0, 0, "", 0)))
	x("set_config io 0x11", request(cmdSetConfig, 0, 0x11, 5, lockspace("ls1", 0, 0, "", 0)))
	x("set_config io 100000", request(cmdSetConfig, 0, 0x10, 100000, lockspace("ls1", 0, 0, "", 0)))
	time.Sleep(12 * time.Second)
	t.Logf("sector1 after io change %s", sector(t, ls, 1))
	x("read_ls_host h1 joined", request(cmdReadLSHost, 0, 0, 0, lockspace("ls1", 1, 0, ls, 0)))
	x("init h1 while joined", request(cmdInitLSHost, 0x2, 0, 0, lockspace("ls1", 1, 0, ls, 0), leaderRec(1, 9, "x", 1)))
	// NO_DISK release with holder
	x("write res", request(cmdWriteResource, 0, 0, 0, resource("ls1", "r1", 0, rf, 0)))
	c := register(t, sock)
	exchangeOn(t, c, request(cmdAcquire, 0, 1, 0xffffffff, resource("ls1", "r1", 0, rf, 0), make([]byte, optionsSize)), 30*time.Second)
	t.Logf("res after acquire %s", sector(t, rf, 1))
	exchangeOn(t, c, request(cmdRelease, 0x8, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)), 30*time.Second)
	t.Logf("res after NO_DISK release %s", sector(t, rf, 1))
	exchangeOn(t, c, request(cmdAcquire, 0, 1, 0xffffffff, resource("ls1", "r1", 0, rf, 0), make([]byte, optionsSize)), 30*time.Second)
	t.Logf("res after reacquire %s", sector(t, rf, 1))
	exchangeOn(t, c, request(cmdRelease, 0, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)), 30*time.Second)
	t.Logf("res after release %s", sector(t, rf, 1))
	x("LS_FLAGS on joined ls1 0x110", request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls1", 0, 0x110, ls, 0)))
	t.Logf("sector1 after LS_FLAGS %s", sector(t, ls, 1))
	time.Sleep(12 * time.Second)
	x("get_lockspaces", request(cmdGetLockspaces, 0, 0, 0))
	t.Logf("log: %s", real.Log())
}
