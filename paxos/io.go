package paxos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// This file is the multi-disk I/O of a lease (docs/paxos.md "Several disks"). Every I/O is
// issued alone, in disk order, with a context whose deadline is our
// io_timeout. Reads land in pooled aligned buffers (diskio.ReadBuf) that
// are released once decoded; a buffer whose read failed is never seen
// again, and one whose read timed out is never pooled again, so a late
// completion cannot corrupt later data.

func isTimeout(err error) bool {
	return errors.Is(err, rescode.ErrIOTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// ioErr maps an I/O error to the result code of its kind: a timeout is
// SANLK_AIO_TIMEOUT, anything else the given code.
func ioErr(err error, code rescode.Code) error {
	if isTimeout(err) {
		return fmt.Errorf("%v: %w", err, rescode.ErrAIOTimeout)
	}
	return fmt.Errorf("%v: %w", err, code)
}

// read reads n bytes at rel on one disk into a pooled buffer, which the
// caller releases once it has decoded what it needs.
func (l *Lease) read(ctx context.Context, disk int, n int, rel int64) (*diskio.Buf, error) {
	return readDisk(ctx, l.Disks[disk], n, rel, l.Host.ioTimeout())
}

func (l *Lease) write(ctx context.Context, disk int, buf []byte, rel int64) error {
	return writeDisk(ctx, l.guard, l.Disks[disk], buf, rel, l.Host.ioTimeout())
}

// readDisk reads n bytes at rel on d with its own io_timeout deadline (a
// cancelled ctx does not cut an I/O short: the deadline does).
func readDisk(ctx context.Context, d Disk, n int, rel int64, timeout time.Duration) (*diskio.Buf, error) {
	ioctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return diskio.ReadBuf(ioctx, d.Dev, n, d.Offset+rel)
}

// writeDisk writes buf at rel on d with its own io_timeout deadline. A
// write that guard refuses (guard.go) is not issued.
func writeDisk(ctx context.Context, guard WriteGuard, d Disk, buf []byte, rel int64, timeout time.Duration) error {
	if !allowWrite(guard) {
		return errWriteRefused
	}
	ioctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return d.Dev.WriteAt(ioctx, buf, d.Offset+rel)
}

// sectorBuf returns a zeroed sector.
func sectorBuf(ss int) []byte { return make([]byte, ss) }

// leaderSector is a sector holding the sealed leader and zeros.
func leaderSector(ld *diskfmt.Leader, ss int) []byte {
	b := sectorBuf(ss)
	ld.Seal(b)
	return b
}

// hostSector is our dblock sector: the sealed dblock, the mode block if mb
// is not nil, zeros everywhere else (so a nil mb clears the mode block).
func hostSector(d *diskfmt.Dblock, mb *diskfmt.ModeBlock, ss int) []byte {
	b := sectorBuf(ss)
	d.Seal(b)
	if mb != nil {
		mb.Encode(b[diskfmt.ModeBlockOffset:])
	}
	return b
}

func hostOffset(hostID uint64, ss int) int64 { return diskfmt.DblockSector(hostID) * int64(ss) }

// validLeader is one disk's verified leader with its compared bytes.
type validLeader struct {
	ld  diskfmt.Leader
	cmp [diskfmt.LeaderCompareLen]byte // bytes [0,152)
}

func newValidLeader(ld diskfmt.Leader, buf []byte) validLeader {
	v := validLeader{ld: ld}
	copy(v.cmp[:], buf)
	return v
}

// majorityLeader finds a leader whose first 152 bytes are identical on a
// majority of all n disks.
func majorityLeader(v []validLeader, n int) (diskfmt.Leader, bool) {
	for i := range v {
		same := 0
		for j := range v {
			if v[i].cmp == v[j].cmp {
				same++
			}
		}
		if Majority(n, same) {
			return v[i].ld, true
		}
	}
	return diskfmt.Leader{}, false
}

// MaxMbalFull scans a full-read buffer: the N dblocks at stride ss after the
// leader and request sectors. Any bad checksum, or a dblock lying past the
// buffer (a lease larger than the hinted area, quirk Q3), fails with
// SANLK_DBLOCK_CHECKSUM. It returns the largest mbal, whatever the lver.
func MaxMbalFull(buf []byte, ss int, numHosts uint64) (uint64, error) {
	var m uint64
	for q := uint64(0); q < numHosts; q++ {
		off := (2 + q) * uint64(ss)
		if off+diskfmt.DblockSize > uint64(len(buf)) {
			return 0, fmt.Errorf("dblock %d beyond the %d-byte read: %w", q+1, len(buf), rescode.ErrDblockChecksum)
		}
		if zeroDblock(buf[off : off+diskfmt.DblockSize]) {
			continue // mbal 0, nothing to checksum (see EvalBallotBuf)
		}
		d, err := diskfmt.DecodeDblock(buf[off:])
		if err != nil {
			return 0, fmt.Errorf("dblock %d: %w", q+1, err)
		}
		m = max(m, d.Mbal)
	}
	return m, nil
}

// DecodeSlots decodes the dblock and mode block of hosts 1..N from a ballot
// read buffer.
func DecodeSlots(buf []byte, ss int, numHosts uint64) []Slot {
	slots := make([]Slot, 0, numHosts)
	for q := uint64(0); q < numHosts; q++ {
		slots = append(slots, SlotAt(buf, ss, q+1))
	}
	return slots
}

// checkAligned refuses a lease offset that is not a multiple of the
// device's sector size with -EINVAL: the direct I/O read there fails with
// EINVAL, and sanlock 3.8.5 passes that errno through as the acquire result
// (ours answers -210 for the other read errors).
func checkAligned(d Disk) error {
	if ss := int64(d.Dev.SectorSize()); ss > 0 && d.Offset%ss != 0 {
		return fmt.Errorf("offset %d is not a multiple of the %d-byte sector: %w", d.Offset, ss, rescode.ErrEINVAL)
	}
	return nil
}

// SlotAt decodes host hostID's dblock and mode block from a ballot read
// buffer in place (no allocation). A slot that lies outside the buffer is
// Bad.
func SlotAt(buf []byte, ss int, hostID uint64) Slot {
	s := Slot{HostID: hostID}
	off := (1 + hostID) * uint64(ss)
	if off+uint64(ss) > uint64(len(buf)) {
		s.Bad = true
		return s
	}
	var err error
	s.Dblock, err = diskfmt.DecodeDblock(buf[off:])
	s.Bad = err != nil
	s.Mode, _ = diskfmt.DecodeModeBlock(buf[off+diskfmt.ModeBlockOffset:])
	return s
}

// fullRead is the first read of an acquire (docs/paxos.md "Acquire algorithm" step 1): align
// bytes from every disk, leader verified, every dblock checksummed at the
// hinted stride. One good disk is enough for the dblocks (max_mbal over the
// good disks), but the leader must be identical on a majority of all disks.
func (l *Lease) fullRead(ctx context.Context, ss, align int) (diskfmt.Leader, uint64, error) {
	h := l.Host
	var good []validLeader
	var maxMbal uint64
	var lastErr error
	for i := range l.Disks {
		if err := checkAligned(l.Disks[i]); err != nil {
			lastErr = err
			continue
		}
		b, err := l.read(ctx, i, align, 0)
		if err != nil {
			lastErr = ioErr(err, rescode.ErrDblockRead)
			continue
		}
		buf := b.Bytes()
		ld, err := diskfmt.VerifyPaxos(buf, h.Space, l.Name, h.ID)
		if err != nil {
			b.Release()
			lastErr = err
			continue
		}
		m, err := MaxMbalFull(buf, ss, ld.NumHosts)
		if err != nil {
			b.Release()
			lastErr = err
			continue
		}
		maxMbal = max(maxMbal, m)
		good = append(good, newValidLeader(ld, buf))
		b.Release()
	}
	if len(good) == 0 {
		if len(l.Disks) == 1 {
			return diskfmt.Leader{}, 0, lastErr
		}
		return diskfmt.Leader{}, 0, fmt.Errorf("no disk readable: %v: %w", lastErr, rescode.ErrDblockRead)
	}
	ld, ok := majorityLeader(good, len(l.Disks))
	if !ok {
		return good[0].ld, 0, rescode.ErrLeaderDiff
	}
	return ld, maxMbal, nil
}

// leaderRead reads sector 0 of every disk (ReadLeader) as this host.
func (l *Lease) leaderRead(ctx context.Context, ss int) (diskfmt.Leader, error) {
	h := l.Host
	return ReadLeader(ctx, LeaderIO{Disks: l.Disks, SectorSize: ss, IOTimeout: h.ioTimeout()}, h.Space, l.Name, h.ID)
}

// writeLeader writes the leader to every disk (WriteLeader).
func (l *Lease) writeLeader(ctx context.Context, ld *diskfmt.Leader, ss int) error {
	return WriteLeader(ctx, LeaderIO{Disks: l.Disks, SectorSize: ss, IOTimeout: l.Host.ioTimeout(), guard: l.guard}, ld)
}

// LeaderIO names the leader sectors of one resource lease: the lease's
// disks, its sector size, and the deadline of each I/O. It is all that
// ReadLeader and WriteLeader need, so a tool without a Host (sanlock direct
// release) reads and writes a leader exactly as a ballot does.
type LeaderIO struct {
	Disks      []Disk
	SectorSize int           // 512 or 4096: the leader's sector
	IOTimeout  time.Duration // deadline of each read or write
	// DeviceErrors makes a lease on a single disk fail with the device's
	// own read or write error (an errno, as the sanlock 3.8.5 direct tool
	// prints it) instead of SANLK_LEADER_READ / SANLK_LEADER_WRITE.
	DeviceErrors bool

	guard WriteGuard // the guarded request's, for writeLeader
}

// ReadLeader reads sector 0 of every disk (docs/paxos.md "Several disks")
// and returns the leader that a majority of all disks agree on: a majority
// must verify (diskfmt.VerifyPaxos for space, name and hostID; hostID 0
// skips the num_hosts check) and a majority must be identical over the
// compared bytes.
//
// Errors: with one disk, that disk's error (a read error wrapped with
// SANLK_LEADER_READ, or SANLK_AIO_TIMEOUT after a timeout, or as the device
// returned it with DeviceErrors; a verify error as is). With several, SANLK_LEADER_READ when too few verify, and
// SANLK_LEADER_DIFF, with the first verified leader, when no majority is
// identical. Disks are read one at a time in order; nothing is written.
func ReadLeader(ctx context.Context, lio LeaderIO, space, name string, hostID uint64) (diskfmt.Leader, error) {
	var good []validLeader
	var lastErr error
	for _, d := range lio.Disks {
		b, err := readDisk(ctx, d, lio.SectorSize, 0, lio.IOTimeout)
		if err != nil {
			lastErr = ioErr(err, rescode.ErrLeaderRead)
			if lio.DeviceErrors {
				lastErr = err
			}
			continue
		}
		ld, err := diskfmt.VerifyPaxos(b.Bytes(), space, name, hostID)
		if err == nil {
			good = append(good, newValidLeader(ld, b.Bytes()))
		}
		b.Release()
		if err != nil {
			lastErr = err
			continue
		}
	}
	n := len(lio.Disks)
	if !Majority(n, len(good)) {
		if n == 1 {
			return diskfmt.Leader{}, lastErr
		}
		return diskfmt.Leader{}, fmt.Errorf("%d of %d leaders read: %v: %w", len(good), n, lastErr, rescode.ErrLeaderRead)
	}
	ld, ok := majorityLeader(good, n)
	if !ok {
		return good[0].ld, rescode.ErrLeaderDiff
	}
	return ld, nil
}

// WriteLeader seals ld into a fresh zeroed sector for each disk and writes
// it at sector 0 of every disk in order; a majority must succeed. A
// failure is SANLK_AIO_TIMEOUT if any write timed out, else
// SANLK_LEADER_WRITE, with one disk too unless DeviceErrors.
func WriteLeader(ctx context.Context, lio LeaderIO, ld *diskfmt.Leader) error {
	ok, timedOut := 0, false
	var lastErr error
	for _, d := range lio.Disks {
		if err := writeDisk(ctx, lio.guard, d, leaderSector(ld, lio.SectorSize), 0, lio.IOTimeout); err != nil {
			lastErr = err
			timedOut = timedOut || isTimeout(err)
			continue
		}
		ok++
	}
	if Majority(len(lio.Disks), ok) {
		return nil
	}
	if lio.DeviceErrors && len(lio.Disks) == 1 {
		return lastErr
	}
	if timedOut {
		return fmt.Errorf("leader write: %v: %w", lastErr, rescode.ErrAIOTimeout)
	}
	return fmt.Errorf("leader write: %v: %w", lastErr, rescode.ErrLeaderWrite)
}

// writeBallotBlock writes our dblock sector to every disk and returns how
// many writes succeeded (a ballot needs a majority).
func (l *Lease) writeBallotBlock(ctx context.Context, sector []byte, ss int) int {
	ok := 0
	for i := range l.Disks {
		// a fresh copy per disk: a timed-out write may still own its buffer
		b := append([]byte(nil), sector...)
		if err := l.write(ctx, i, b, hostOffset(l.Host.ID, ss)); err == nil {
			ok++
		}
	}
	return ok
}

// writeHostBlock writes a sector of host hostID to every disk in turn and
// stops at the first error; all must succeed (sanlock's write_host_block,
// used for the combined dblock + mode block writes and for clearing).
func (l *Lease) writeHostBlock(ctx context.Context, hostID uint64, sector []byte, ss int) error {
	for i := range l.Disks {
		b := append([]byte(nil), sector...)
		if err := l.write(ctx, i, b, hostOffset(hostID, ss)); err != nil {
			return ioErr(err, rescode.ErrDblockWrite)
		}
	}
	return nil
}
