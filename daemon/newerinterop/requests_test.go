package newerinterop

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

// TestRequestsAsLibsanlock checks that the requests the other tests of
// this package build are byte for byte what libsanlock 5.1.1 sends for
// the same call: each call is made by the C driver under strace
// (debtree.Tree.Trace) against a 5.1.1 daemon, whose answers do not
// matter here.
func TestRequestsAsLibsanlock(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	files := leaseFiles(t, "ls", "res")
	ls, res := files[0], files[1]
	d := tr.StartDaemon(t, "", "-e", "tracehost")
	drv := tr.NewerDriver(t)
	opts := make([]byte, optionsSize)

	for _, c := range []struct {
		call []string
		want []byte
	}{
		{[]string{"acquire2", "ls1", "r1", res, "0", "0", "0", "1234"},
			request(cmdAcquire2, 0, 1, 1234, resource("ls1", "r1", 0, res, 0), opts)},
		{[]string{"read_lockspace_host", "-", ls, "0", "2", "0"},
			request(cmdReadLSHost, 0, 0, 0, lockspace("", 2, 0, ls, 0))},
		{[]string{"init_lockspace_host", "ls2", ls, "0", "5", "0", "hostfive", "3", "1234", "2", "10"},
			request(cmdInitLSHost, 0x2, 0, 10, lockspace("ls2", 5, 0, ls, 0), leaderRec(5, 3, "hostfive", 1234))},
		{[]string{"set_host", "ls1", ls, "0", "1", "1", "0", "0", "2", "7", "0", "0", "0"},
			request(cmdSetHost, 0, 1, 0, lockspace("ls1", 1, 0, ls, 0), hostRec(2, 7, 0, 0, 0))},
		{[]string{"add_lockspace", "ls9", res, "0", "1", "2", "0"},
			request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls9", 1, 0, res, 0))},
		{[]string{"get_hosts", "ls1", "0", "1"},
			request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 0, 0, "", 0))},
		{[]string{"write_lockspace", "ls2", ls, "0", "0", "0x114", "0", "1", "0"},
			request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x114, ls, 0))},
		{[]string{"set_config", "ls1", "0", "16", "10"},
			request(cmdSetConfig, 0, 0x10, 10, lockspace("ls1", 0, 0, "", 0))},
		{[]string{"release", "ls1", "r1", res, "0", "0", "0x8", "1234"},
			request(cmdRelease, 0x8, 1, 1234, resource("ls1", "r1", 0, "", 0))},
		{[]string{"acquire", "ls1", "r1", res, "0", "0", "0x10", "2"},
			request(cmdAcquire, 0x10, 1, 2, resource("ls1", "r1", 0, res, 0), opts)},
		{[]string{"inquire", "0x10", "2"},
			request(cmdInquire, 0x10, 0, 2)},
	} {
		t.Run(c.call[0], func(t *testing.T) {
			out, sent := tr.Trace(t, d.RunDir, append([]string{drv}, c.call...)...)
			if len(sent) != 1 {
				t.Fatalf("%v: %d connections to the daemon, want 1 (%s)", c.call, len(sent), out)
			}
			if !bytes.Equal(sent[0], c.want) {
				t.Errorf("%v: libsanlock sent\n%s\nwe build\n%s", c.call, dump(sent[0]), dump(c.want))
			}
			t.Logf("%s-> %s", out, fmt.Sprintf("%d bytes", len(sent[0])))
		})
	}
}

// dump is hex.Dump without the all-zero lines.
func dump(b []byte) string {
	var out bytes.Buffer
	for off := 0; off < len(b); off += 16 {
		end := min(off+16, len(b))
		if bytes.Count(b[off:end], []byte{0}) == end-off {
			continue
		}
		fmt.Fprintf(&out, "%06x %s\n", off, hex.EncodeToString(b[off:end]))
	}
	return out.String()
}
