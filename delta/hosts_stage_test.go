package delta_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// refTable is the host table processing as it was before Stage/Apply:
// every record of every read decoded and compared. The staged table must
// match it entry for entry.
type refTable struct {
	firstCheck uint64
	hosts      []delta.HostStatus
}

func newRefTable(n int) *refTable {
	t := &refTable{hosts: make([]delta.HostStatus, n)}
	for i := range t.hosts {
		t.hosts[i].HostID = uint64(i + 1)
	}
	return t
}

func (t *refTable) process(now uint64, area []byte, ss int, space string, ourID uint64, sbs int) delta.ProcessResult {
	var res delta.ProcessResult
	if t.firstCheck == 0 {
		t.firstCheck = now
	}
	for i := 1; i <= len(t.hosts) && i*ss <= len(area); i++ {
		raw := area[(i-1)*ss : i*ss]
		h := &t.hosts[i-1]
		h.LastCheck = now
		rec, _ := diskfmt.DecodeLeader(raw)
		good := rec.Magic == diskfmt.DeltaMagic && diskfmt.NameEqual(rec.SpaceName[:], space)
		if !good {
			h.LeaseBad++
			if h.LeaseBad == 1 || h.LeaseBad%100 == 0 {
				res.Log = append(res.Log, fmt.Sprintf("invalid %d", i))
			}
		} else if h.LeaseBad != 0 {
			res.Log = append(res.Log, fmt.Sprintf("corrected %d", i))
			h.LeaseBad = 0
		}
		if good && (!diskfmt.NameEqual(rec.ResourceName[:], h.OwnerName) || rec.OwnerGeneration != h.OwnerGeneration) {
			name := diskfmt.NameString(rec.ResourceName[:])
			res.Log = append(res.Log, fmt.Sprintf("host %d", i))
			h.OwnerName = name
		}
		if good && rec.Flags != h.Flags {
			if rec.DeadExt() && !h.DeadExt() {
				res.Log = append(res.Log, fmt.Sprintf("dead ext %d", i))
				h.FoundDeadExtGen = rec.OwnerGeneration
			}
			h.Flags = rec.Flags
		}
		if rec.OwnerID == h.OwnerID && rec.OwnerGeneration == h.OwnerGeneration && rec.Timestamp == h.Timestamp {
			continue
		}
		if good {
			h.OwnerID, h.OwnerGeneration, h.IOTimeout = rec.OwnerID, rec.OwnerGeneration, rec.IOTimeout
		}
		h.Timestamp = rec.Timestamp
		h.LastLive = now
		if uint64(i) == ourID || !diskfmt.BitmapTest(raw, ourID) {
			continue
		}
		if rec.WriteGeneration != 0 {
			res.Events = append(res.Events, delta.ReceivedEvent{
				Event:      delta.HostEvent{HostID: ourID, Generation: rec.WriteID, Event: rec.WriteGeneration, Data: rec.WriteTimestamp},
				FromHostID: h.OwnerID, FromGeneration: h.OwnerGeneration,
			})
			res.Log = append(res.Log, fmt.Sprintf("event %d", i))
		}
		if h.LastReq != 0 && now-h.LastReq < uint64(sbs) {
			continue
		}
		h.LastReq = now
		res.Requests = append(res.Requests, uint64(i))
		res.Log = append(res.Log, fmt.Sprintf("request %d", i))
	}
	return res
}

// mutate changes a few records of area the ways a lockspace changes (a
// renewal, a join, a release, a bitmap bit, an event) and the ways it may
// be damaged (magic, lockspace name, bytes after a name's NUL).
func mutate(r *rand.Rand, area []byte, ss, hosts int) {
	for range r.IntN(6) {
		i := r.IntN(hosts)
		sec := area[i*ss : (i+1)*ss]
		l, _ := diskfmt.DecodeLeader(sec)
		switch r.IntN(11) {
		case 0, 1, 2:
			l.Timestamp++
		case 3:
			l.OwnerID, l.OwnerGeneration, l.Timestamp = uint64(i+1), l.OwnerGeneration+1, l.Timestamp+1
			copy(l.ResourceName[:], fmt.Sprintf("host%d\x00", r.IntN(3)))
		case 4:
			l.Timestamp = 0
		case 5:
			l.Magic ^= uint32(r.IntN(2))
		case 6:
			l.SpaceName[r.IntN(4)] ^= byte(r.IntN(2))
		case 7:
			l.ResourceName[40] = byte(r.IntN(256)) // after the NUL of a short name
		case 8:
			l.ResourceName[r.IntN(6)] = byte('a' + r.IntN(2))
		case 9:
			l.WriteID, l.WriteGeneration, l.WriteTimestamp = r.Uint64N(3), r.Uint64N(3), r.Uint64N(3)
			l.Timestamp++
		case 10:
			sec[diskfmt.BitmapOffset+r.IntN(2)] ^= byte(1 << r.IntN(8))
			continue
		}
		l.Seal(sec)
	}
}

// TestStageApplyMatchesFullProcessing: Stage/Apply (and Process) give
// exactly the table, events, requests and log lines of decoding every
// record of every read, over random sequences of reads, including reads
// staged twice before one Apply.
func TestStageApplyMatchesFullProcessing(t *testing.T) {
	const ss, hosts, ourID, sbs = 512, 12, 2, 3
	g := diskfmt.Geometry{SectorSize: ss, AlignSize: 1 << 20, MaxHosts: hosts}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		area, _, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "SP", IOTimeout: 1})
		if err != nil {
			t.Fatal(err)
		}
		area = area[:hosts*ss]
		tab, ref := delta.NewHostTable(hosts), newRefTable(hosts)
		for step := range 300 {
			now := uint64(step + 1)
			mutate(r, area, ss, hosts)
			if r.IntN(5) == 0 { // a read that is never processed: only the newest counts
				tab.Stage(area, g, "SP", ourID)
				mutate(r, area, ss, hosts)
			}
			got := tab.Process(now, area, g, "SP", ourID, sbs)
			want := ref.process(now, area, ss, "SP", ourID, sbs)
			if fmt.Sprint(got.Events, got.Requests, len(got.Log)) != fmt.Sprint(want.Events, want.Requests, len(want.Log)) {
				t.Fatalf("seed %d step %d: got %v %v %d log lines, want %v %v %v", seed, step,
					got.Events, got.Requests, len(got.Log), want.Events, want.Requests, want.Log)
			}
			if tab.FirstCheck() != ref.firstCheck {
				t.Fatalf("seed %d step %d: first check %d, want %d", seed, step, tab.FirstCheck(), ref.firstCheck)
			}
			for id := 1; id <= hosts; id++ {
				h, _ := tab.Host(uint64(id))
				if h != ref.hosts[id-1] {
					t.Fatalf("seed %d step %d host %d:\n got %+v\nwant %+v", seed, step, id, h, ref.hosts[id-1])
				}
			}
		}
	}
}

// TestApplyWithoutStage: nothing staged, nothing done.
func TestApplyWithoutStage(t *testing.T) {
	tab := delta.NewHostTable(4)
	res := tab.Apply(5, "SP", 3)
	if tab.Ready() || len(res.Log)+len(res.Events)+len(res.Requests) != 0 {
		t.Fatalf("Apply with nothing staged changed the table: ready %v, %+v", tab.Ready(), res)
	}
}

// TestStageSameTimestampNewRecord: a record rewritten with a new host name
// and generation but the same timestamp is seen (its checksum changed),
// also after many reads in which it did not change (Stage's one-line
// check).
func TestStageSameTimestampNewRecord(t *testing.T) {
	const ss, hosts = 512, 16
	area, g, l := delta.AreaWithHostA(t, hosts)
	sec := area[2*ss : 3*ss]
	tab := delta.NewHostTable(hosts)
	for now := uint64(1); now <= 5; now++ {
		tab.Process(now, area, g, "SP", 1, 3)
	}
	l.OwnerGeneration = 2
	copy(l.ResourceName[:], "hostB")
	l.Seal(sec)
	res := tab.Process(6, area, g, "SP", 1, 3)
	h, _ := tab.Host(3)
	if h.OwnerName != "hostB" || h.OwnerGeneration != 2 || len(res.Log) != 1 {
		t.Fatalf("rewritten record with the same timestamp: %+v, log %q", h, res.Log)
	}
}
