package manager

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/wire"
)

// TestClientsRegistry: registration, names, restrict flags, the kill
// program and the escalation's marks, as the CLIENT record shows them.
func TestClientsRegistry(t *testing.T) {
	r := NewClientRegistry()
	r.Add(7, ClientStatus{Order: 3, Pid: -1})
	r.Add(8, ClientStatus{Order: 2, Pid: -1})
	rec := func(id ClientID) string {
		st, _ := r.Status(id)
		return st.Record(st.Order, 10+st.Order, 0, 0).Text
	}

	r.NameCommand(7, "status")
	st, ok := r.Status(7)
	assert.True(t, ok)
	assert.Equal(t, "status", st.Name)
	assert.False(t, r.MarkDead(7), "an unregistered client has no pid to mark dead")
	_, ok = r.ByPid(100)
	assert.False(t, ok)

	r.Register(7, 100)
	r.Register(8, 100)
	r.NameCommand(7, "cmd7")
	st, _ = r.Status(7)
	assert.Equal(t, "100", st.Name, "a registered client keeps its name")
	id, ok := r.ByPid(100)
	assert.True(t, ok)
	assert.Equal(t, ClientID(8), id, "the lowest order first")

	r.SetName(7, strings.Repeat("n", 60))
	st, _ = r.Status(7)
	assert.Len(t, st.Name, wire.NameLen)
	r.Restrict(7, wire.RestrictSigterm)
	r.SetKillpath(7, "/bin/kp", "a b", wire.KillpathPID|0x4)
	r.NoteKill(7, 3, 1234, true)
	assert.Equal(t, "ci=3 fd=13 pid=100 flags=3 restricted=4 cmd_active=0 cmd_last=0 pid_dead=0 kill_count=3 kill_last=1234 suspend=0 need_free=0", rec(7))
	r.SetKillpath(7, "", "", 0)
	r.ResetKill(7)
	assert.True(t, r.MarkDead(7))
	assert.False(t, r.MarkDead(7), "once")
	assert.Equal(t, "ci=3 fd=13 pid=100 flags=2 restricted=4 cmd_active=0 cmd_last=0 pid_dead=1 kill_count=0 kill_last=0 suspend=0 need_free=0", rec(7))

	r.Remove(8)
	id, _ = r.ByPid(100)
	assert.Equal(t, ClientID(7), id)
	r.Remove(7)
	r.Register(7, 100) // gone: ignored
	_, ok = r.ByPid(100)
	assert.False(t, ok)
	st, ok = r.Status(7)
	assert.False(t, ok)
	got := st.Record(0, -1, 0, 0)
	assert.Equal(t, uint32(0xffffffff), got.State.Data32)
	assert.Equal(t, "ci=0 fd=-1 pid=-1 flags=0 restricted=0 cmd_active=0 cmd_last=0 pid_dead=0 kill_count=0 kill_last=0 suspend=0 need_free=0", got.Text)
}
