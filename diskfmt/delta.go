package diskfmt

// Delta lease layout: host_id N owns sector N-1 of the lockspace area. The
// leader sits at byte 0 and the host bitmap at byte 256.
const (
	BitmapOffset = 256
	BitmapSize   = 256 // 2048 bits: one per host_id

	// DefaultIOTimeout is the io_timeout (seconds) written by init and used
	// by the tools when none is given.
	DefaultIOTimeout = 10
)

// DeltaSectorOffset is the byte offset of host hostID's delta lease from
// the lockspace start.
func DeltaSectorOffset(hostID uint64, sectorSize int) int64 {
	return int64(hostID-1) * int64(sectorSize)
}

// BitmapTest reports whether hostID's bit is set in a delta-lease sector.
func BitmapTest(sector []byte, hostID uint64) bool {
	if hostID == 0 || hostID > BitmapSize*8 || len(sector) < BitmapOffset+BitmapSize {
		return false
	}
	i := hostID - 1
	return sector[BitmapOffset+i/8]&(1<<(i%8)) != 0
}

// BitmapSet sets hostID's bit in a delta-lease sector.
func BitmapSet(sector []byte, hostID uint64) {
	if hostID == 0 || hostID > BitmapSize*8 || len(sector) < BitmapOffset+BitmapSize {
		return
	}
	i := hostID - 1
	sector[BitmapOffset+i/8] |= 1 << (i % 8)
}

// BitmapHosts lists the host_ids (1..maxHosts) whose bits are set.
func BitmapHosts(sector []byte, maxHosts int) []uint64 {
	var ids []uint64
	for h := uint64(1); h <= uint64(maxHosts) && h <= BitmapSize*8; h++ {
		if BitmapTest(sector, h) {
			ids = append(ids, h)
		}
	}
	return ids
}

// DeltaInit describes a lockspace to write with InitDeltaArea.
type DeltaInit struct {
	Geometry
	SpaceName string
	IOTimeout uint16
	// Version is the delta lease version written: DeltaVersion (also
	// when 0), DeltaVersion40 or DeltaVersion50.
	Version uint32
}

// InitDeltaArea builds the two writes that initialise a lockspace: the whole
// align-size area with every delta lease free and sector 0's magic zeroed,
// then the one-sector commit that gives sector 0 its real magic. A crash
// between the two leaves a lockspace that readers reject (magic 0).
func InitDeltaArea(d DeltaInit) (area, commit []byte, err error) {
	space, err := Name(d.SpaceName)
	if err != nil {
		return nil, nil, err
	}
	version := d.Version
	if version == 0 {
		version = DeltaVersion
	}
	l := Leader{
		Magic:      DeltaMagic,
		Version:    version,
		Flags:      AlignFlag(d.AlignSize),
		SectorSize: uint32(d.SectorSize),
		NumHosts:   0,
		MaxHosts:   1,
		SpaceName:  space,
		IOTimeout:  d.IOTimeout,
	}
	area = make([]byte, d.AlignSize)
	for i := 1; i < d.MaxHosts; i++ {
		l.Seal(area[i*d.SectorSize:])
	}
	commit = make([]byte, d.SectorSize)
	l.Seal(commit)
	first := l
	first.Magic = 0
	first.Seal(area)
	return area, commit, nil
}
