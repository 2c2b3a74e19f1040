package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gosanlock/gosanlock/client"
)

// TestLocksText: the table layout for every kind of row, without a daemon.
func TestLocksText(t *testing.T) {
	hosts := []LocksHost{
		{HostID: 1, Name: "host-a", Generation: 3, Timestamp: 100, State: "LIVE"},
		{HostID: 2, Name: "b", Generation: 1, Timestamp: 99, State: "LIVE", Local: true},
		{HostID: 7, Generation: 2, Timestamp: 5, State: "DEAD"},
		{HostID: 9, Generation: 1, Timestamp: 7, State: "UNKNOWN"},
	}
	// The daemon's time is 1000; host 2 is us, last renewed at 999; host
	// 7 (io_timeout 10, fire timeout 60) was last seen renewing at 765:
	// 235 s ago, 95 s past 8*10+60; host 9 was first read at 990 and has
	// not been seen renewing.
	view := daemonView{now: 1000, fire: 60, spaces: map[string]Keys{"LS": {"renewal_last_success": "999"}}}
	recs := map[uint64]HostStatusHost{1: {LastLive: 997, IOTimeout: 10}, 2: {LastLive: 990, IOTimeout: 10},
		7: {LastLive: 765, IOTimeout: 10}, 9: {LastLive: 990, IOTimeout: 10}}
	flags := map[string]uint32{"LIVE": client.HostLive, "DEAD": client.HostDead, "UNKNOWN": client.HostUnknown}
	for i := range hosts {
		h := &hosts[i]
		h.LastLive, h.RenewedAgo, h.DeadFor = view.hostAge("LS", 2,
			client.Host{HostID: h.HostID, Timestamp: h.Timestamp, Flags: flags[h.State]}, recs)
	}
	if hosts[3].LastLive != 990 || hosts[3].RenewedAgo != nil || hosts[1].LastLive != 999 {
		t.Errorf("ages: %+v", hosts)
	}
	l := &LocksJSON{
		HostName: "b",
		Monotime: 1000,
		Lockspaces: []LocksLockspace{
			{Name: "LS", HostID: 2, State: lsJoined, Hosts: hosts},
			{Name: "LS2", HostID: 1, State: lsFailed, HostsResult: -11},
		},
		Resources: []LocksResource{
			{Lockspace: "LS", Name: "R1", Lver: 4, Mode: "EX", Owners: []LocksOwner{{HostID: 1, Name: "host-a", Mode: "EX"}}},
			{Lockspace: "LS", Name: "R2", Lver: 2, Mode: "SH",
				Owners: []LocksOwner{{HostID: 1, Name: "host-a", Mode: "SH"}, {HostID: 2, Name: "b", Mode: "SH", Local: true}},
				Local:  []LocksProcess{{Pid: 10, Command: "qemu", Mode: "SH", List: "held"}, {Pid: 11, Command: "vm2", Mode: "SH", List: "held"}}},
			{Lockspace: "LS", Name: "R3", Mode: "FREE"},
			{Lockspace: "LS", Name: "R4", Mode: "UNKNOWN", ReadResult: -22},
			{Lockspace: "LS", Name: "R5", Lver: 9, Mode: "EX", ReadResult: -5,
				Local: []LocksProcess{{Pid: 12, Mode: "EX", Lver: 9, List: "orphan"}}},
		},
	}
	var out bytes.Buffer
	c := &clientRun{out: &out}
	c.printLocks(l)
	want := `LOCKSPACE     HOST_ID  HOST_NAME  GENERATION  TIMESTAMP  STATE            AGE
LS            1        host-a     3           100        LIVE             renewed 3 s ago
LS            2*       b          1           99         LIVE             renewed 1 s ago
LS            7        -          2           5          DEAD             dead for 95 s
LS            9        -          1           7          UNKNOWN          -
LS2 (FAILED)  -        -          -           -          hosts error -11  -

LOCKSPACE  RESOURCE  MODE               LVER  HOST_ID  HOST_NAME  PID  COMMAND
LS         R1        EX                 4     1        host-a     -    -
LS         R2        SH                 2     1        host-a     -    -
LS         R2        SH                 2     2*       b          10   qemu
LS         R2        SH                 2     2*       b          11   vm2
LS         R3        FREE               0     -        -          -    -
LS         R4        UNKNOWN(read -22)  0     -        -          -    -
LS         R5        EX                 9     *        -          12   - (orphan)
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestJSONScanMessages: with --json, what the option scanner prints goes to
// stderr, so stdout holds only the JSON object.
func TestJSONScanMessages(t *testing.T) {
	t.Setenv("SANLOCK_RUN_DIR", t.TempDir())
	var out, errb bytes.Buffer
	run := func(args ...string) int {
		f := testFactory(&out, &errb)
		defer f.Out.Flush()
		return f.Main(args)
	}
	rc := run("client", "locks", "-r", "x", "--json")
	if rc != 1 || !strings.HasPrefix(errb.String(), "resource arg parse error -6\n\n") {
		t.Errorf("rc %d stderr %q", rc, errb.String())
	}
	checkJSON(t, "locks", out.String())
	out.Reset()
	errb.Reset()
	rc = run("client", "status", "--json", "-X", "1")
	if rc != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "unknown option: X") {
		t.Errorf("rc %d stdout %q stderr %q", rc, out.String(), errb.String())
	}
}
