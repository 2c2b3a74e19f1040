package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/strictpeer"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wire"
)

// Strict peer mode (strict.go): the decisions through the daemon, in
// process (the policy table: internal/strictpeer). The impersonation attempts made with python3-sanlock against
// sanlock 3.8.5 and our daemon are in daemon/interop (TestStrictPeerPython).

func TestStrictPeerConfig(t *testing.T) {
	c := config.DefaultConfig()
	assert.False(t, c.StrictPeer, "off by default (3.8.5 behaviour)")
	assert.True(t, c.ApplyConfigKey("strict_peer", "1"))
	assert.True(t, c.StrictPeer)
	require.NoError(t, c.ApplyOption('X', "0"))
	assert.False(t, c.StrictPeer)
}

func TestStrictAllowed(t *testing.T) {
	cfg := testutil.DaemonConfig(testutil.ShortTempDir(t))
	cfg.SetIDs(0, 4242)
	cfg.StrictPeer = true
	s := New(cfg, Deps{})
	s.holders = func(space, name string) []int { // resource LS:R1 held by pid 42
		if space == "LS" && name == "R1" {
			return []int{42}
		}
		return nil
	}

	req := func(cmd wire.Cmd, flags, data2 uint32, res ...string) *wire.Request {
		q := &wire.Request{Header: wire.Header{Cmd: cmd, CmdFlags: flags, Data2: data2}}
		for _, r := range res {
			q.Resources = append(q.Resources, wire.Resource{LockspaceName: "LS", Name: r})
		}
		return q
	}
	user := strictpeer.Identity{Pid: 7, UID: 1000, GID: 1000, Known: true}
	group := strictpeer.Identity{Pid: 8, UID: 1000, GID: 1000, Groups: []int{4242}, Known: true}
	holder := strictpeer.Identity{Pid: 42, UID: 1000, GID: 1000, Known: true}
	for _, c := range []struct {
		name   string
		id     strictpeer.Identity
		q      *wire.Request
		ok     bool
		target int
	}{
		{"own registration", user, req(wire.CmdAcquire, 0, selfPid), true, -1},
		{"own pid", user, req(wire.CmdInquire, 0, 7), true, -1},
		{"other pid inquire", user, req(wire.CmdInquire, 0, 42), false, 42},
		{"other pid acquire", user, req(wire.CmdAcquire, 0, 42), false, 42},
		{"other pid release", user, req(wire.CmdRelease, 0, 42), false, 42},
		{"other pid convert", user, req(wire.CmdConvert, 0, 42), false, 42},
		{"other pid killpath", user, req(wire.CmdKillpath, 0, 42), false, 42},
		{"other pid release orphans", user, req(wire.CmdRelease, wire.RelOrphan, 42, "R1"), false, 42},
		{"own killpath", user, req(wire.CmdKillpath, 0, selfPid), false, -1},
		{"own killpath by the group", group, req(wire.CmdKillpath, 0, selfPid), true, -1},
		{"unknown peer", strictpeer.Identity{Pid: 7}, req(wire.CmdInquire, 0, 7), false, 7},
		{"group acts for others", group, req(wire.CmdRelease, 0, 42), true, -1},
		{"root acts for others", strictpeer.Identity{Pid: 9, Known: true}, req(wire.CmdConvert, 0, 42), true, -1},
		{"release orphans", user, req(wire.CmdRelease, wire.RelOrphan, selfPid, "R1"), false, -1},
		{"adopt orphan", user, req(wire.CmdAcquire, wire.AcquireOrphan, selfPid, "R1"), false, -1},
		{"set_lvb of another's lease", user, req(wire.CmdSetLVB, 0, 0, "R1"), false, 42},
		{"get_lvb of another's lease", user, req(wire.CmdGetLVB, 0, 0, "R1"), false, 42},
		{"set_lvb of own lease", holder, req(wire.CmdSetLVB, 0, 0, "R1"), true, -1},
		{"set_lvb of a lease nobody holds", user, req(wire.CmdSetLVB, 0, 0, "R2"), true, -1},
		{"rem_lockspace", user, req(wire.CmdRemLockspace, 0, 0), false, -1},
		{"rem_lockspace by the group", group, req(wire.CmdRemLockspace, 0, 0), true, -1},
		{"add_lockspace", user, req(wire.CmdAddLockspace, 0, 0), true, -1},
		{"request", user, req(wire.CmdRequest, 0, 0, "R1"), true, -1},
	} {
		target, ok := s.strictAllowed(c.id, c.q)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.target, target, c.name)
	}
}
