// Command lab-holder is the lease holder of the QEMU lab's scenarios. It
// is started by "sanlock client command -r RESOURCE -c lab-holder ...", so
// it is the process registered with the daemon and holding the lease.
//
// It reads the lease's version (lver) from the resource's leader on the
// shared disk, then once a second reads the token sector and writes its
// own token "tok LVER NAME SEQ" there, both with O_DIRECT, so that its
// process sits in the kernel (D state) whenever the guest's storage hangs.
// The lease version is the fencing token: a holder that reads a token with
// a higher version, or its own version written by another host, reports a
// VIOLATION (two holders of one lease) and exits, as does one that finds
// its last token overwritten while it holds. With -no-token it does no
// I/O after reading the version, and with -ignore-term only SIGKILL ends
// it. Every step is logged on standard output with the guest's clock.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	sector = 512
	// lverOffset is the place of the lease version in a paxos leader
	// record (docs/ondisk.md): magic, version, flags, sector size (4
	// bytes each), num_hosts, max_hosts, owner_id, owner_generation (8
	// bytes each), then lver.
	lverOffset = 48
)

func main() {
	dev := flag.String("dev", "/dev/vda", "shared disk")
	leaseOff := flag.Int64("lease", 1<<20, "offset of the resource lease")
	tokenOff := flag.Int64("token", 8<<20, "offset of the token sector")
	name := flag.String("name", "", "host name written in the tokens")
	pidFile := flag.String("pidfile", "/run/lab-holder.pid", "file to write the pid to")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM (only SIGKILL ends the holder)")
	noToken := flag.Bool("no-token", false, "after reading the lease version, only sleep: no I/O on the shared disk")
	flag.Parse()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if err := os.WriteFile(*pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		logf("error pidfile: %v", err)
	}
	f, err := os.OpenFile(*dev, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		logf("error open: %v", err)
		os.Exit(1)
	}
	defer f.Close()
	buf := aligned(4096)
	if _, err := f.ReadAt(buf, *leaseOff); err != nil {
		logf("error read leader: %v", err)
		os.Exit(1)
	}
	lver := binary.LittleEndian.Uint64(buf[lverOffset:])
	logf("acquired lver %d pid %d", lver, os.Getpid())
	if *noToken {
		for {
			time.Sleep(time.Hour)
		}
	}
	last := ""
	for seq := uint64(1); ; seq++ {
		if _, err := f.ReadAt(buf[:sector], *tokenOff); err != nil {
			logf("error read token: %v", err)
			os.Exit(1)
		}
		prev := string(bytes.TrimRight(buf[:sector], "\x00"))
		var pl uint64
		var powner string
		var pseq uint64
		if n, _ := fmt.Sscanf(prev, "tok %d %s %d", &pl, &powner, &pseq); n == 3 {
			if pl > lver || (pl == lver && powner != *name) {
				logf("VIOLATION token %q seen by holder of lver %d", prev, lver)
				os.Exit(3)
			}
		}
		if last != "" && prev != last {
			logf("VIOLATION token %q written over ours %q while we hold lver %d", prev, last, lver)
			os.Exit(3)
		}
		for i := range buf[:sector] {
			buf[i] = 0
		}
		copy(buf, fmt.Sprintf("tok %d %s %d", lver, *name, seq))
		if _, err := f.WriteAt(buf[:sector], *tokenOff); err != nil {
			logf("error write token: %v", err)
			os.Exit(1)
		}
		last = string(bytes.TrimRight(buf[:sector], "\x00"))
		logf("wrote lver %d seq %d (was %q)", lver, seq, strings.TrimSpace(prev))
		time.Sleep(time.Second)
	}
}

// aligned returns n bytes aligned for O_DIRECT.
func aligned(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)
	if off == 4096 {
		off = 0
	}
	return b[off : off+n]
}

// logf prints one line with the guest's wall clock.
func logf(format string, args ...any) {
	fmt.Printf("%.3f %s\n", float64(time.Now().UnixNano())/1e9, fmt.Sprintf(format, args...))
}
