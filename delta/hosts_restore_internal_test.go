package delta

import (
	"testing"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// TestRestoreForgetsSums: entries restored into a table that has already
// learned its records' checksums are compared in full at the next read
// (Stage's one-line check only trusts what it learned against the table's
// own entries).
func TestRestoreForgetsSums(t *testing.T) {
	const hosts = 8
	area, g, _ := areaWithHostA(t, hosts)
	tab := NewHostTable(hosts)
	for now := uint64(1); now <= 3; now++ {
		tab.Process(now, area, g, "SP", 1, 3)
	}
	st, ok := tab.export()
	if !ok {
		t.Fatal("nothing to export")
	}
	st.Hosts[2].OwnerName = "hostB" // the same timestamp, another name
	tab.restore(&st)
	res := tab.Process(4, area, g, "SP", 1, 3)
	h, _ := tab.Host(3)
	if h.OwnerName != "hostA" || len(res.Log) != 1 {
		t.Fatalf("after restore: %+v, log %q", h, res.Log)
	}
}

// areaWithHostA returns the first hosts sectors of a fresh delta area of
// lockspace SP (512-byte sectors) and its geometry, host_id 3's record
// written: owner 3, generation 1, timestamp 100, name hostA. The record
// is returned too; its sector is area[2*512:3*512].
func areaWithHostA(t testing.TB, hosts int) ([]byte, diskfmt.Geometry, diskfmt.Leader) {
	t.Helper()
	const ss = 512
	g := diskfmt.Geometry{SectorSize: ss, AlignSize: 1 << 20, MaxHosts: hosts}
	area, _, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "SP", IOTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	area = area[:hosts*ss]
	sec := area[2*ss : 3*ss]
	l, _ := diskfmt.DecodeLeader(sec)
	l.OwnerID, l.OwnerGeneration, l.Timestamp = 3, 1, 100
	copy(l.ResourceName[:], "hostA")
	l.Seal(sec)
	return area, g, l
}
