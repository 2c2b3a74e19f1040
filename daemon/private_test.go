package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wire"
)

// evilScript writes an executable whose path is short enough to be a
// lockspace or resource name; running it creates the file it returns as
// ran. Nothing a client sends may ever run it.
func evilScript(t *testing.T) (path, ran string) {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	path = filepath.Join(dir, "x")
	ran = filepath.Join(dir, "ran")
	require.Less(t, len(path), wire.NameLen)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755))
	return path, ran
}

// hostileRequests are messages of the sanlock 5.x commands 41..44 whose
// names, paths and records are the path of an executable, or fill their
// fields without a terminator, or announce more than they carry.
func hostileRequests(t *testing.T, exe string) map[string][]byte {
	t.Helper()
	long := strings.Repeat("A", 2000)
	disk := func(p string) wire.Disk { return wire.Disk{Path: p} }
	res := func(name, path string) wire.Resource {
		return wire.Resource{LockspaceName: name, Name: name, NumDisks: 1, Disks: []wire.Disk{disk(path)}}
	}
	enc := func(q *wire.Request) []byte {
		b, err := q.MarshalBinary()
		require.NoError(t, err)
		return b
	}
	// raw fills every payload byte with c after a valid header for cmd,
	// so no name or path has a terminator; length as announced.
	raw := func(cmd wire.Cmd, n int, c byte, data uint32) []byte {
		b := testutil.RawHeader(wire.Magic, 1, cmd, 0, uint32(wire.HeaderSize+n), 0, data, 0xffffffff)
		return append(b, bytes.Repeat([]byte{c}, n)...)
	}
	m := map[string][]byte{}
	acq := wire.NewRequest(wire.CmdAcquire2, 0, 1, 0xffffffff)
	acq.Resources = []wire.Resource{res(exe, exe)}
	acq.Options = &wire.Options{OwnerName: exe}
	m["acquire2 exe"] = enc(acq)
	m["acquire2 no terminators"] = raw(wire.CmdAcquire2, wire.ResourceSize+wire.DiskSize+wire.OptionsSize, 'A', 1)
	m["acquire2 9 resources"] = raw(wire.CmdAcquire2, 0, 0, 9)
	m["acquire2 2^32-1 resources"] = raw(wire.CmdAcquire2, 0, 0, 0xffffffff)
	bad := enc(acq)
	binary.LittleEndian.PutUint32(bad[wire.HeaderSize+wire.NameLen*2+28:], 0xffffffff) // num_disks
	m["acquire2 num_disks 2^32-1"] = bad
	over := append(enc(acq), bytes.Repeat([]byte(exe), 100)...)
	binary.LittleEndian.PutUint32(over[16:], uint32(len(over)))
	m["acquire2 trailing bytes announced"] = over
	for cmd, size := range map[wire.Cmd]int{
		wire.CmdReadLockspaceHost: wire.LockspaceSize,
		wire.CmdInitLockspaceHost: wire.LockspaceSize + wire.DeltaLeaderSize,
		wire.CmdSetHost:           wire.LockspaceSize + wire.HostSize,
	} {
		q := wire.NewRequest(cmd, 0, 1, 0)
		q.Lockspace = &wire.Lockspace{Name: exe, HostID: 1, Disk: disk(exe)}
		q.DeltaLeader = bytes.Repeat([]byte(exe+"\x00"), 20)[:wire.DeltaLeaderSize]
		q.Host = &wire.Host{HostID: 0xffffffffffffffff, Generation: 1, Flags: 0x10}
		m[cmd.DebugName()+" exe"] = enc(q)
		m[cmd.DebugName()+" no terminators"] = raw(cmd, size, 'B', 1)
		q.Lockspace.Disk = disk(long[:wire.PathLen-1])
		m[cmd.DebugName()+" long path"] = enc(q)
	}
	return m
}

// TestSanlock5CommandsNeverReexec: sanlock 5.x's commands 41..44
// (acquire2 is 41, once gosanlock's own reexec number) with hostile
// payloads get an error reply (init_host of an existing file writes its
// delta lease there) on a connection that stays usable; nothing
// is executed, no reexec is tried, the daemon serves and the leases held
// stay held.
func TestSanlock5CommandsNeverReexec(t *testing.T) {
	t.Parallel()
	f := newReexecFixture(t)
	exe, ran := evilScript(t)
	for name, msg := range hostileRequests(t, exe) {
		c := f.td.dial()
		_, err := c.Write(msg)
		require.NoError(t, err, name)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		// The reply as its command shapes it (READ_LOCKSPACE_HOST's
		// carries the lockspace and a host record on errors too).
		rp, err := wire.ReadReply(c, wire.Cmd(binary.LittleEndian.Uint32(msg[8:])))
		require.NoError(t, err, "%s: an answer", name)
		h := rp.Header
		assert.Equal(t, wire.Magic, h.Magic, name)
		assert.Equal(t, binary.LittleEndian.Uint32(msg[8:]), uint32(h.Cmd), name)
		if name == wire.CmdInitLockspaceHost.DebugName()+" exe" {
			// A well-formed init_host: it writes a delta lease into
			// the named file (as 5.1.1's does), which executes nothing.
			assert.Equal(t, int32(0), h.Result(), name)
		} else {
			assert.Less(t, h.Result(), int32(0), "%s: an error", name)
		}
		if strings.Contains(name, "trailing") {
			// Requests are framed by their command, never by the
			// length field: the trailing bytes are read as the next
			// header, whose magic is wrong, and the connection ends.
			continue
		}
		// The connection goes on: VERSION on it is answered.
		v, err := wire.NewRequest(wire.CmdVersion, 0, 0, 0).MarshalBinary()
		require.NoError(t, err)
		_, err = c.Write(v)
		require.NoError(t, err, name)
		p, err := wire.ReadReply(c, wire.CmdVersion)
		require.NoError(t, err, "%s: the connection still serves", name)
		assert.Equal(t, wire.DaemonVersion, p.Header.Data2)
	}
	_, err := os.Stat(ran)
	assert.True(t, os.IsNotExist(err), "the executable named by the payloads ran")
	for _, e := range f.td.logs.All() {
		assert.NotContains(t, e.Message, "reexec", "a reexec was tried")
	}
	f.intact(t)
	f.td.mustVersion()
}

// TestPrivateCommandsNeedTheirMagic: the number of a private command
// under sanlock's magic is an unknown command (-ENOSYS, no reexec), and
// sanlock's command numbers under the private magic are too; the hello
// is answered only under its own magic.
func TestPrivateCommandsNeedTheirMagic(t *testing.T) {
	t.Parallel()
	f := newReexecFixture(t)
	for name, b := range map[string][]byte{
		"reexec under sanlock magic": testutil.RawHeader(wire.Magic, 1, wire.CmdReexec, 0, 32, 0, 0, 0),
		"acquire2 under private":     testutil.RawHeader(wire.PrivateMagic, 1, wire.CmdAcquire2, 0, 32, 0, 0, 0),
		"private 0":                  testutil.RawHeader(wire.PrivateMagic, 1, wire.PrivateCmdBase, 0, 32, 0, 0, 0),
		"private 99":                 testutil.RawHeader(wire.PrivateMagic, 1, wire.PrivateCmdBase+99, 0, 32, 0, 0, 0),
	} {
		c := f.td.dial()
		_, err := c.Write(b)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		var hb [wire.HeaderSize]byte
		_, err = io.ReadFull(c, hb[:])
		require.NoError(t, err, name)
		var h wire.Header
		require.NoError(t, h.Decode(hb[:]))
		assert.EqualValues(t, -38, h.Result(), name)
	}
	for _, e := range f.td.logs.All() {
		assert.NotContains(t, e.Message, "reexec", "a reexec was tried")
	}
	require.NoError(t, f.td.cl.Hello(context.Background(), 5*time.Second))
	f.intact(t)
}
