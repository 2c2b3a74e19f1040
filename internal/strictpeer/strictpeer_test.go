package strictpeer

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/wire"
)

// The policy table. The decisions through the daemon are in daemon
// (TestStrictAllowed), the impersonation attempts with python3-sanlock in
// daemon/interop (TestStrictPeerPython).

func TestStrictPolicy(t *testing.T) {
	req := func(cmd wire.Cmd, flags, data uint32) *wire.Request {
		return &wire.Request{Header: wire.Header{Cmd: cmd, CmdFlags: flags, Data: data}}
	}
	for _, c := range []struct {
		q    *wire.Request
		want Policy
	}{
		{req(wire.CmdAcquire, 0, 0), OwnPid},
		{req(wire.CmdAcquire, wire.AcquireOrphan, 0), PrivOnly},
		{req(wire.CmdAcquire2, 0, 0), OwnPid},
		{req(wire.CmdAcquire2, wire.AcquireOrphan, 0), PrivOnly},
		{req(wire.CmdAcquire, wire.ForClientID, 0), PrivOnly},
		{req(wire.CmdRelease, wire.ForClientID, 0), PrivOnly},
		{req(wire.CmdInquire, wire.ForClientID, 0), PrivOnly},
		{req(wire.CmdConvert, wire.ForClientID, 0), PrivOnly},
		{req(wire.CmdRelease, 0, 0), OwnPid},
		{req(wire.CmdRelease, wire.RelOrphan, 0), PrivOnly},
		{req(wire.CmdInquire, 0, 0), OwnPid},
		{req(wire.CmdConvert, 0, 0), OwnPid},
		{req(wire.CmdKillpath, 0, 0), PrivOnly},
		{req(wire.CmdSetLVB, 0, 0), OwnLease},
		{req(wire.CmdGetLVB, 0, 0), OwnLease},
		{req(wire.CmdRemLockspace, 0, 0), PrivOnly},
		{req(wire.CmdSetHost, 0, 1), PrivOnly},
		{req(wire.CmdShutdown, 0, 0), Open},
		{req(wire.CmdShutdown, 0, 1), PrivOnly},
		{req(wire.CmdShutdownWait, 0, 1), PrivOnly},
		{req(wire.CmdAddLockspace, 0, 0), Open},
		{req(wire.CmdStatus, 0, 0), Open},
	} {
		assert.Equal(t, c.want, PolicyOf(c.q), "%s flags %x data %d", c.q.Header.Cmd.DebugName(), c.q.Header.CmdFlags, c.q.Header.Data)
	}
	id := Identity{Pid: 10, UID: 1000, GID: 1000, Groups: []int{5, 6}, Known: true}
	assert.False(t, id.Privileged(0))
	assert.True(t, id.Privileged(1000), "primary group")
	assert.True(t, id.Privileged(6), "supplementary group")
	id.UID = 0
	assert.True(t, id.Privileged(7), "root")
	assert.False(t, Identity{UID: 0}.Privileged(0), "unknown peer")
}

func TestCheckWithoutHolders(t *testing.T) {
	user := Identity{Pid: 7, UID: 1000, GID: 1000, Known: true}
	q := &wire.Request{Header: wire.Header{Cmd: wire.CmdSetLVB},
		Resources: []wire.Resource{{LockspaceName: "LS", Name: "R1"}}}
	err := Check(user, 4242, nil, q)
	var r *Refusal
	if assert.ErrorAs(t, err, &r) {
		assert.Equal(t, -1, r.Target)
	}
	assert.NoError(t, Check(user, 1000, nil, q), "the daemon's group")
}
