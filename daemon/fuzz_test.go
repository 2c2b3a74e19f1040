package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// fuzzDaemon is the daemon FuzzCommands talks to: one per fuzzing
// process, joined to a lockspace with a lease held by a registered
// client, so that the lease and lockspace commands reach the manager.
var fuzzDaemon struct {
	once   sync.Once
	td     *testDaemon
	holder *client.Reg
}

// FuzzCommands sends a header with every command number, 0..255 under
// sanlock's magic and the private range under gosanlock's, with random
// flags, data and length and a random payload, to a live daemon; the
// connection is then half-closed. The daemon must end every exchange
// (an answer, or closing the connection) well within the read deadline,
// never stop, and keep serving the registered client. (A message may
// release that client's lease or leave the lockspace: sanlock lets any
// local client do that, so it is not checked.)
//
// Every '/' of the payload is replaced so that no path a command names
// is absolute: the fuzzing process runs in a directory of its own, so a
// disk command finds nothing to read or write outside it. SHUTDOWN and
// SHUTDOWN_WAIT are sent as VERSION (they would end the daemon).
func FuzzCommands(f *testing.F) {
	for c := 0; c <= int(wire.MaxCmd)+2; c++ {
		f.Add(uint8(c), false, uint32(0), uint32(0), uint32(0), uint32(32), []byte{})
	}
	f.Add(uint8(1), true, uint32(0), uint32(0), uint32(0), uint32(32), []byte{})
	f.Add(uint8(2), true, uint32(0), uint32(0), uint32(0), uint32(32), []byte{})
	f.Add(uint8(3), true, uint32(0), uint32(0), uint32(0), uint32(32), []byte{})
	f.Add(uint8(41), false, uint32(0), uint32(1), uint32(0xffffffff), uint32(32+128+1040+56),
		bytes.Repeat([]byte("x"), 128+1040+56))
	f.Add(uint8(200), false, uint32(7), uint32(7), uint32(7), uint32(32+700), bytes.Repeat([]byte{0}, 700))
	fuzzDaemon.once.Do(func() {
		dir, err := os.MkdirTemp("/var/tmp", "gsfuzz")
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.Chdir(dir); err != nil {
			f.Fatal(err)
		}
		rc := newResCluster(f, 1, 3, manager.Setup{})
		h, err := rc.tds[0].cl.Register(context.Background())
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { h.Close() })
		if err := h.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil); err != nil {
			f.Fatal(err)
		}
		fuzzDaemon.td, fuzzDaemon.holder = rc.tds[0], h
	})
	td, holder := fuzzDaemon.td, fuzzDaemon.holder
	if td == nil {
		f.Skip("no daemon")
	}
	f.Fuzz(func(t *testing.T, c uint8, private bool, flags, data, data2, length uint32, payload []byte) {
		magic, cmd := wire.Magic, wire.Cmd(c)
		if private {
			magic, cmd = wire.PrivateMagic, wire.PrivateCmdBase+wire.Cmd(c)
		}
		if cmd == wire.CmdShutdown || cmd == wire.CmdShutdownWait {
			cmd = wire.CmdVersion
		}
		if len(payload) > 4*wire.DefaultMaxPayload {
			payload = payload[:4*wire.DefaultMaxPayload]
		}
		msg := make([]byte, wire.HeaderSize, wire.HeaderSize+len(payload))
		le := binary.LittleEndian
		le.PutUint32(msg[0:], magic)
		le.PutUint32(msg[4:], wire.ProtoVersion)
		le.PutUint32(msg[8:], uint32(cmd))
		le.PutUint32(msg[12:], flags)
		le.PutUint32(msg[16:], length)
		le.PutUint32(msg[24:], data)
		le.PutUint32(msg[28:], data2)
		msg = append(msg, bytes.ReplaceAll(payload, []byte("/"), []byte("_"))...)

		conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: td.srv.SockPath(), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = conn.Write(msg) // the daemon may close first
		_ = conn.CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("cmd %d (private %v) left the client waiting: % x", c, private, msg[:wire.HeaderSize])
		}
		select {
		case <-td.srv.Done():
			t.Fatalf("the daemon stopped after cmd %d (private %v)", c, private)
		default:
		}
		if _, err := holder.Inquire(context.Background()); err != nil {
			t.Fatalf("after cmd %d (private %v): the registered client is not served: %v", c, private, err)
		}
	})
}
