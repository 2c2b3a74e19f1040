package newerinterop

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

// TestLibrariesLookAlike: what `sanlock client version`, `release` and
// `inquire` of 3.9.5 and of 5.1.1 send is byte for byte the same (a
// listener stands in for the daemon), so a daemon cannot tell which
// numbering of the release results (-250/-251 or -252/-253) its client
// expects (docs/compat.md "Result codes").
func TestLibrariesLookAlike(t *testing.T) {
	t.Parallel()
	calls := [][]string{{"client", "version"}, {"client", "release", "-r", "LS:R:/x:0", "-p", "5"}, {"client", "inquire", "-p", "5"}}
	sent := map[string][][]byte{}
	for _, name := range []string{"sid", "trixie"} {
		tr := debtree.Get(t, name)
		run := debtree.RunDir(t)
		if err := os.MkdirAll(filepath.Join(run, "sanlock"), 0o755); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", filepath.Join(run, "sanlock", "sanlock.sock"))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, len(calls))
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// The header, then the length it announces (the library
				// may write them separately).
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 32, 4096)
				if _, err := io.ReadFull(c, b); err == nil {
					if n := int(le.Uint32(b[16:])); n > 32 && n <= 4096 {
						b = b[:n]
						_, _ = io.ReadFull(c, b[32:])
					}
				}
				got <- b
				c.Close()
			}
		}()
		for _, args := range calls {
			_, _ = tr.Command(&debtree.Options{RunDir: run}, append([]string{"sanlock"}, args...)...).CombinedOutput()
			select {
			case b := <-got:
				sent[name] = append(sent[name], b)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s %v: nothing sent", name, args)
			}
		}
		ln.Close()
	}
	for i, args := range calls {
		if a, b := sent["trixie"][i], sent["sid"][i]; !bytes.Equal(a, b) {
			t.Errorf("%v: 3.9.5 sent % x, 5.1.1 sent % x", args, a, b)
		}
	}
}
