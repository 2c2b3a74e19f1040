package debtree_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
)

// TestTrees starts the 3.9.5 and the 5.1.1 daemon side by side, runs
// `sanlock client status` in each tree, and talks to each daemon from the
// host with our client: VERSION, STATUS, and a WRITE_LOCKSPACE of a
// lease file under /var/tmp that the host then reads (the same file
// inside and outside the tree).
func TestTrees(t *testing.T) {
	for _, tc := range []struct{ name, version string }{{"trixie", "3.9.5"}, {"sid", "5.1.1"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := debtree.Get(t, tc.name)
			if tr.Version != tc.version {
				t.Fatalf("%s: sanlock version %q, want %q", tc.name, tr.Version, tc.version)
			}
			d := tr.StartDaemon(t, "")

			out, err := d.Client(t, "client", "status")
			if err != nil {
				t.Fatalf("sanlock client status: %v\n%s", err, out)
			}
			if !strings.Contains(out, "daemon") {
				t.Fatalf("sanlock client status printed %q", out)
			}

			cl, err := client.Dial(d.HostRunDir())
			if err != nil {
				t.Fatal(err)
			}
			v, proto, err := cl.Version(context.Background())
			if err != nil {
				t.Fatalf("VERSION: %v", err)
			}
			want := fmt.Sprint(v>>24, ".", v>>16&0xff, ".", v>>8&0xff)
			if want != tc.version {
				t.Errorf("VERSION answered %#x (%s), proto %#x", v, want, proto)
			}
			recs, err := cl.Status(context.Background(), 0)
			if err != nil || len(recs) == 0 {
				t.Fatalf("STATUS: %v, %d records", err, len(recs))
			}

			dir, err := os.MkdirTemp("/var/tmp", "dtls")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			path := filepath.Join(dir, "leases")
			if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			ls := &client.Lockspace{Name: "dt", Disk: client.Disk{Path: path}}
			if err := cl.WriteLockspace(context.Background(), ls, 0, 0); err != nil {
				t.Fatalf("WRITE_LOCKSPACE %s: %v", path, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if m := binary.LittleEndian.Uint32(b); m != 0x12212010 {
				t.Fatalf("host sees magic %#x in %s after the %s daemon wrote it", m, path, tc.version)
			}
			if tc.name == "sid" {
				// The driver program, compiled against 5.1.1's libsanlock.
				r := tr.CallOnce(t, d.RunDir, "version")
				if r.RV != 0 || r.Fields["version"] != "0x05010100" {
					t.Errorf("driver: %s", r.Line)
				}
				r = tr.CallOnce(t, d.RunDir, "read_lockspace_host", "-", path, "0", "1", "0")
				if r.RV != 0 || r.Fields["ls_name"] != "dt" || r.Field("h_io_timeout") != 10 {
					t.Errorf("driver: %s", r.Line)
				}
			}
			got, _, err := cl.ReadLockspace(context.Background(), &client.Lockspace{Disk: client.Disk{Path: path}})
			if err != nil || got.Name != "dt" {
				t.Fatalf("READ_LOCKSPACE: %v %+v", err, got)
			}
		})
	}
}

// TestCommandMounts checks the namespace of Tree.Command: an extra bind
// mount (a file over /dev/watchdog, which the host's /dev does not need
// to have), the run directory at /run, the host's /var/tmp, and that
// nothing the programs mounted is left in the host's mount table.
func TestCommandMounts(t *testing.T) {
	tr := debtree.Get(t, "trixie")
	before, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	run := debtree.RunDir(t)
	if err := os.WriteFile(filepath.Join(run, "marker"), []byte("run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "fakewd")
	if err := os.WriteFile(fake, []byte("watchdog\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vt, err := os.CreateTemp("/var/tmp", "dtvt")
	if err != nil {
		t.Fatal(err)
	}
	vt.WriteString("vartmp\n")
	vt.Close()
	t.Cleanup(func() { os.Remove(vt.Name()) })

	out, err := tr.Command(&debtree.Options{
		RunDir: run,
		Binds:  []debtree.Bind{{Host: fake, Tree: "/dev/watchdog"}},
		Env:    []string{"X=y"},
		Dir:    "/run",
	}, "sh", "-c", `cat /dev/watchdog marker `+vt.Name()+`; echo $X; test -c /dev/null && echo null; grep -c . /etc/debian_version`).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "watchdog\nrun\nvartmp\ny\nnull\n1\n"; string(out) != want {
		t.Fatalf("inside the tree: %q, want %q", out, want)
	}
	after, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(after), "\n") {
		if strings.Contains(l, tr.Root) && !strings.Contains(string(before), l) {
			t.Errorf("left mounted in the host: %s", l)
		}
	}
	if _, err := os.Stat("/dev/watchdog"); err == nil {
		if b, _ := os.ReadFile("/dev/watchdog"); string(b) == "watchdog\n" {
			t.Errorf("the fake watchdog shows in the host's /dev")
		}
	}
}
