package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// writeLineMax is the longest piece of an input line handled at once: the
// tool reads the -F file in pieces of at most 127 bytes (C fgets into a
// 128-byte buffer), so a longer line is taken as several lines.
const writeLineMax = 127

// writeLeader is "direct write_leader": it reads a leader (the -s host_id's
// delta lease, or the -r resource's paxos leader) without verifying it,
// replaces the fields named in the -F file ("<field> <value>" lines), prints
// the checksum it computed, writes the leader back as a whole sector (the
// rest of the sector zero) and prints it. It is a repair tool: names are not
// checked, and the sector size written is the leader's own (so a file may
// change it). Read failures leave an all-zero leader to edit.
func (d *direct) writeLeader(o *DirectWriteLeaderOptions) int {
	f, err := d.openLeaderFile(o.File)
	if err != nil {
		return 1
	}
	defer f.Close()

	// A -s with a path selects the delta lease; the field names (extra*
	// or write_*) follow whether a -r was given, as in sanlock.
	delta := o.Resource == nil
	var (
		l     diskfmt.Leader
		rv    int
		write func(*diskfmt.Leader) int
	)
	switch {
	case o.Lockspace.Disk.Path != "":
		l, rv, write = d.readDeltaForWrite(o.Lockspace)
	case o.Resource != nil:
		l, rv, write = d.readPaxosForWrite(*o.Resource)
	default:
		rv = int(rescode.ErrEPERM)
	}

	// The checksum read is not kept: with -f it is 0 unless the file
	// gives one.
	l.Checksum = 0
	applyLeaderFile(d.out, f, &l, delta)

	gen := l.ComputeChecksum()
	if o.Force != 0 {
		fmt.Fprintf(d.out, "warning: using specified checksum %x (generated is %x)\n", l.Checksum, gen)
		if o.Lockspace.Disk.Path == "" {
			// A paxos leader is always written with its true checksum.
			l.Checksum = gen
		}
	} else {
		fmt.Fprintf(d.out, "use new generated checksum %x\n", gen)
		l.Checksum = gen
	}
	// Unlike sanlock, whose delta write_leader writes an uninitialised
	// checksum, the checksum printed is the one written.
	if rv == 0 {
		rv = write(&l)
	}
	fmt.Fprintf(d.out, "write_leader done %d\n", rv)
	if rv == 0 {
		printLeader(d.out, &l, delta)
	}
	return rv
}

// openLeaderFile opens the -F file or prints why it cannot.
func (d *direct) openLeaderFile(file string) (*os.File, error) {
	if file == "" {
		fmt.Fprintf(d.out, "open error %d (null)\n", int(syscall.EFAULT))
		return nil, syscall.EFAULT
	}
	f, err := os.Open(file)
	if err != nil {
		errno := syscall.EIO
		errors.As(err, &errno)
		fmt.Fprintf(d.out, "open error %d %s\n", int(errno), file)
		return nil, err
	}
	return f, nil
}

// writeLeaderSector writes l as a whole sector of l's own sector size at
// off + (index * that size).
func (d *direct) writeLeaderSector(path string, off int64, index uint64, l *diskfmt.Leader) int {
	ss := int(l.SectorSize)
	if ss != diskfmt.SectorSize512 && ss != diskfmt.SectorSize4K {
		return int(rescode.ErrEINVAL)
	}
	dev, err := d.open(path)
	if err != nil {
		return rvOf(err)
	}
	defer dev.Close()
	ctx, cancel := d.ioContext()
	defer cancel()
	b := make([]byte, ss)
	l.Encode(b)
	return rvOf(dev.WriteAt(ctx, b, off+int64(index)*int64(ss)))
}

// readDeltaForWrite reads the delta lease of the -s host_id: sizes from
// -Z/-A, else from the leader at the lockspace offset (a leader with an
// unusable sector size, or a failed read, gives an all-zero leader).
func (d *direct) readDeltaForWrite(ls client.Lockspace) (diskfmt.Leader, int, func(*diskfmt.Leader) int) {
	off := int64(ls.Disk.Offset)
	write := func(l *diskfmt.Leader) int { return d.writeLeaderSector(ls.Disk.Path, off, ls.HostID-1, l) }
	if ls.HostID == 0 {
		return diskfmt.Leader{}, int(rescode.ErrEINVAL), nil
	}
	dev, err := d.open(ls.Disk.Path)
	if err != nil {
		return diskfmt.Leader{}, int(rescode.ErrENODEV), nil
	}
	defer dev.Close()
	ctx, cancel := d.ioContext()
	defer cancel()
	ss := 0
	if g, ok := diskfmt.GeometryFromFlags(d.sizeFlags); ok {
		ss = g.SectorSize
	} else if p, err := diskfmt.ProbeLeader(ctx, dev, off); err == nil {
		ss = int(p.SectorSize)
	}
	if ss != diskfmt.SectorSize512 && ss != diskfmt.SectorSize4K {
		return diskfmt.Leader{}, 0, write
	}
	raw, err := diskfmt.ReadSector(ctx, dev, off+diskfmt.DeltaSectorOffset(ls.HostID, ss), ss)
	if err != nil {
		return diskfmt.Leader{}, 0, write
	}
	l, _ := diskfmt.DecodeLeader(raw)
	return l, 0, write
}

// readPaxosForWrite reads the leader of the first -r resource on its first
// disk: one sector of the -Z size, else 4096 bytes.
func (d *direct) readPaxosForWrite(r client.Resource) (diskfmt.Leader, int, func(*diskfmt.Leader) int) {
	if len(r.Disks) == 0 {
		return diskfmt.Leader{}, int(rescode.ErrEPERM), nil
	}
	dk := r.Disks[0]
	write := func(l *diskfmt.Leader) int { return d.writeLeaderSector(dk.Path, int64(dk.Offset), 0, l) }
	dev, err := d.open(dk.Path)
	if err != nil {
		return diskfmt.Leader{}, rvOf(err), nil
	}
	defer dev.Close()
	ss := diskfmt.SectorSize4K
	if g, ok := diskfmt.GeometryFromFlags(d.sizeFlags); ok {
		ss = g.SectorSize
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	raw, err := diskfmt.ReadSector(ctx, dev, int64(dk.Offset), ss)
	if err != nil {
		// sanlock goes on with whatever its buffer held; we use zeros
		return diskfmt.Leader{}, 0, write
	}
	l, _ := diskfmt.DecodeLeader(raw)
	return l, 0, write
}

// applyLeaderFile reads "<field> <value>" lines from r into l, printing
// what it ignores. Lines are read in pieces of at most writeLineMax bytes;
// a piece with fewer than two words is ignored (printed with its newline),
// and so is an unknown field. A value that does not parse leaves the field
// unchanged.
func applyLeaderFile(out io.Writer, r io.Reader, l *diskfmt.Leader, delta bool) {
	br := bufio.NewReader(r)
	for {
		line, err := readPiece(br)
		if line == "" && err != nil {
			return
		}
		if i := strings.IndexByte(line, 0); i >= 0 {
			line = line[:i] // C string
		}
		words := cWords(line, 2)
		if len(words) < 2 {
			fmt.Fprintf(out, "ignore line: \"%s\"\n", line)
			continue
		}
		if !setLeaderField(l, words[0], words[1], delta) {
			fmt.Fprintf(out, "ignore field: \"%s\"\n", words[0])
		}
	}
}

// readPiece returns the next piece of input: up to and including a
// newline, at most writeLineMax bytes.
func readPiece(br *bufio.Reader) (string, error) {
	var b []byte
	for len(b) < writeLineMax {
		c, err := br.ReadByte()
		if err != nil {
			return string(b), err
		}
		b = append(b, c)
		if c == '\n' {
			break
		}
	}
	return string(b), nil
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// cWords splits s into at most n whitespace-separated words, as scanf's %s
// conversions do.
func cWords(s string, n int) []string {
	var w []string
	i := 0
	for len(w) < n {
		for i < len(s) && isCSpace(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isCSpace(s[j]) {
			j++
		}
		if j == i {
			break
		}
		w = append(w, s[i:j])
		i = j
	}
	return w
}

// setLeaderField sets one field from its text; it reports false for a
// field name the tool does not know. magic, version, flags and checksum are
// written "0x<hex>"; the other numbers are decimal; numbers are read as
// scanf reads them (sign allowed, saturating, trailing text ignored); names
// are cut to 48 bytes. delta selects extra1..3 (a delta lease) or write_* (paxos) for the
// last three fields.
func setLeaderField(l *diskfmt.Leader, field, value string, delta bool) bool {
	hex32 := func(p *uint32) {
		if rest, ok := strings.CutPrefix(value, "0x"); ok {
			if v, ok := strtoull(rest, 16); ok {
				*p = uint32(v)
			}
		}
	}
	dec64 := func(p *uint64) {
		if v, ok := strtoull(value, 10); ok {
			*p = v
		}
	}
	name := func(p *[diskfmt.NameLen]byte) {
		*p = [diskfmt.NameLen]byte{}
		copy(p[:], value)
	}
	switch field {
	case "magic":
		hex32(&l.Magic)
	case "version":
		hex32(&l.Version)
	case "flags":
		hex32(&l.Flags)
	case "checksum":
		hex32(&l.Checksum)
	case "sector_size":
		if v, ok := strtoull(value, 10); ok {
			l.SectorSize = uint32(v)
		}
	case "io_timeout":
		if v, ok := strtoull(value, 10); ok {
			l.IOTimeout = uint16(uint32(v))
		}
	case "num_hosts":
		dec64(&l.NumHosts)
	case "max_hosts":
		dec64(&l.MaxHosts)
	case "owner_id":
		dec64(&l.OwnerID)
	case "owner_generation":
		dec64(&l.OwnerGeneration)
	case "lver":
		dec64(&l.Lver)
	case "timestamp":
		dec64(&l.Timestamp)
	case "space_name":
		name(&l.SpaceName)
	case "resource_name":
		name(&l.ResourceName)
	default:
		var p *uint64
		switch {
		case delta && field == "extra1", !delta && field == "write_id":
			p = &l.WriteID
		case delta && field == "extra2", !delta && field == "write_generation":
			p = &l.WriteGeneration
		case delta && field == "extra3", !delta && field == "write_timestamp":
			p = &l.WriteTimestamp
		default:
			return false
		}
		dec64(p)
	}
	return true
}
