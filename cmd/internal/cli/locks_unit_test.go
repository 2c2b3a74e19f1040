package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestLocksText: the table layout for every kind of row, without a daemon.
func TestLocksText(t *testing.T) {
	l := &LocksJSON{
		HostName: "b",
		Lockspaces: []LocksLockspace{
			{Name: "LS", HostID: 2, Hosts: []LocksHost{
				{HostID: 1, Name: "host-a", Generation: 3, Timestamp: 100, State: "LIVE"},
				{HostID: 2, Name: "b", Generation: 1, Timestamp: 99, State: "LIVE", Local: true},
				{HostID: 7, Generation: 2, Timestamp: 5, State: "DEAD"},
			}},
			{Name: "LS2", HostID: 1, HostsResult: -11},
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
	want := `LOCKSPACE  HOST_ID  HOST_NAME  GENERATION  TIMESTAMP  STATE
LS         1        host-a     3           100        LIVE
LS         2*       b          1           99         LIVE
LS         7        -          2           5          DEAD
LS2        -        -          -           -          hosts error -11

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
