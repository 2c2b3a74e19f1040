package handover

import "time"

// State is everything a running daemon hands to the image that replaces
// it (docs/upgrade.md "The state"). It is a plain data transfer object:
// the daemon maps its internals onto it when it hands over and builds its
// internals from it when it takes over; this package only encodes,
// validates and transports it.
//
// File descriptors are never stored by number: every FD field is an
// index into the fd table that travels with the state (Snapshot.Files on
// the old side, Adopted.Files on the new side). An index is used at most
// once; -1 means "none" where a field says so.
type State struct {
	// NumFDs is the size of the fd table the state refers to. The new
	// image checks it against the fds it actually received.
	NumFDs int

	// OldPid and OldVersion identify the image that handed over (for the
	// log; nothing depends on them).
	OldPid     int
	OldVersion string
	// BootID is /proc/sys/kernel/random/boot_id when the state was taken
	// ("" if unreadable). Monotonic times below are only meaningful on the
	// same boot; the new image rejects a state from another boot.
	BootID string
	// TakenMono and TakenWall are CLOCK_MONOTONIC and CLOCK_REALTIME (unix
	// ns) when the state was taken. Times in the lockspaces are given as
	// durations before TakenMono ("Ago"), so the new image rebases them on
	// its own clock with Since(TakenMono).
	TakenMono int64
	TakenWall int64

	Config   Config
	Listener Listener
	// PidFile is the locked pid file, handed over so that its lock
	// (an open-file-description lock follows the fd) is never dropped and
	// no second daemon can start in between; the new image rewrites the
	// pid in it once it has taken over.
	PidFile    PidFile
	Clients    []Client
	Lockspaces []Lockspace
	Tokens     []Token
	Orphans    []Orphan
}

// Config is the daemon configuration the new image needs to resume with
// the same behaviour without re-reading files that may have changed.
type Config struct {
	// Args is the daemon's command line (without argv[0]) and ConfigFile
	// the config file it read ("" if none), for the log and for a new
	// image that prefers to re-parse them.
	Args       []string
	ConfigFile string

	RunDir     string // SANLOCK_RUN_DIR
	SocketPath string // the listening socket's path
	PidFile    string // the lock/pid file the serving process owns
	WdmdSocket string // "" = wdmd's fixed socket
	UID, GID   int    // the ids the daemon runs with (socket ownership)

	UseWatchdog bool
	StrictPeer  bool
	HostName    string // our_host_name

	// Values holds every other resolved setting as config-file key =
	// value (e.g. "renewal_history_size" = "180"), so that settings can
	// be added without a new format version. Keys and values are text.
	Values map[string]string
}

// PidFile is the daemon's locked pid file.
type PidFile struct {
	FD   int // fd table index, -1 = not handed over
	Path string
}

// Listener is the listening unix socket clients connect to.
type Listener struct {
	FD   int    // fd table index (required)
	Path string // its path, for the log and the unlink at shutdown
}

// Client is one accepted client connection.
type Client struct {
	FD   int // fd table index (required, distinct)
	Slot int // the connection's slot ("ci" in STATUS), kept stable

	// PeerPid, PeerUID and PeerGID are SO_PEERCRED at accept. The new
	// image re-reads SO_PEERCRED on the fd and rejects a mismatch.
	PeerPid int32
	PeerUID uint32
	PeerGID uint32

	Registered bool
	Pid        int    // the registered pid, -1 until REGISTER
	Name       string // the client record name
	Restrict   uint32 // RESTRICT flags
	Flags      uint32 // other per-client flags of the daemon
	KillPath   string // KILLPATH program ("" = none)
	KillArgs   string
	PidDead    bool
	KillCount  int

	// EventLockspace is the lockspace this connection registered for
	// events on ("" = none; otherwise a joined lockspace), and
	// PendingEvents the events queued for it but not yet written.
	EventLockspace string
	EventFlags     uint32
	PendingEvents  []Event

	// Pending is a request of this connection that the old image
	// cancelled for the handover, as read from the socket (header and
	// body); the new image runs it again on this connection and answers
	// it (docs/upgrade.md "Pending requests"). Empty: none. Added to
	// format 2 under rule 1 of "Versioning": an image that does not know
	// the field refuses a state with one, and the old image runs the
	// request itself.
	Pending []byte `json:",omitempty"`
}

// MaxPendingLen bounds Client.Pending: a header and the largest body a
// restartable request has (8 resources of 4 disks and options).
const MaxPendingLen = 64 << 10

// Event is a lockspace event (set_event / reg_event).
type Event struct {
	HostID     uint64 // the target (our host_id when received)
	Generation uint64
	Event      uint64
	Data       uint64
	FromHostID uint64 // 0 when not received from another host
	FromGen    uint64
}

// Lockspace is one joined lockspace with the state of its delta lease.
type Lockspace struct {
	Name       string // 1..48 bytes
	HostID     uint64 // 1..MaxHostID
	Path       string
	Offset     uint64
	IOTimeout  uint32 // seconds, > 0
	SectorSize uint32 // 512 or 4096
	AlignSize  uint32 // bytes: 1, 2, 4 or 8 MiB

	Generation uint64 // our delta lease generation
	Timestamp  uint64 // the timestamp of our last successful renewal
	// LastRenewalAgo is how long before State.TakenMono the last
	// successful renewal completed; LastRenewalWall is its wall time.
	LastRenewalAgo  time.Duration
	LastRenewalWall int64
	// Leader is our delta lease record as last written (format 2; set in
	// the final state, when the renewals are paused: the new image
	// continues renewing from it). Zero in a snapshot taken while serving.
	Leader Leader
	// AcquireLastSuccess is the monotime (CLOCK_MONOTONIC seconds) of the
	// acquire of our delta lease, for the status (format 2).
	AcquireLastSuccess uint64

	// History is the tail of the renewal history, oldest first.
	History []Renewal
	// Hosts is the host table as last processed (may be empty: the new
	// image then rebuilds it from the next read).
	Hosts []Host

	// Wdmd is the lockspace's wdmd session (nil with -w 0).
	Wdmd *WdmdSession
	// Event is the event this host publishes in its delta lease (nil =
	// none).
	Event *Event

	// Flags carry per-lockspace state such as "being removed".
	Removing  bool
	SpaceDead bool
	// ExternalUsed and UsedByOrphans are the SET_CONFIG flags (used /
	// used_by_orphans), and UsedRetries the count of removals they
	// blocked. Added without a format version (docs/upgrade.md
	// "Versioning" rule 1): absent means clear, as before.
	ExternalUsed  bool   `json:",omitempty"`
	UsedByOrphans bool   `json:",omitempty"`
	UsedRetries   uint32 `json:",omitempty"`
	// EventListeners are the lockspace's REG_EVENT connections, as fd
	// table indexes (distinct). Added like the flags above: absent means
	// none, and an image that does not know the field refuses a state
	// with listeners at decode.
	EventListeners []int `json:",omitempty"`
	// HostTable is the host table in the final state (nil: not handed
	// over; the new image rebuilds it from its first renewal read). Added
	// like the flags above: an image that does not know the field refuses
	// a state with a table at decode.
	HostTable *HostTable `json:",omitempty"`
}

// HostTable is a lockspace's host table as the daemon keeps it. Its times
// are the daemon's monotime (CLOCK_MONOTONIC whole seconds, the same clock
// in every process of a boot), carried as they are, not rebased.
type HostTable struct {
	FirstCheck uint64 // the first processing of a renewal read (non-zero)
	LastCheck  uint64 // the latest processing
	Checked    int    // records the latest processing covered
	// Hosts are the entries of host_ids 1..len(Hosts), in order.
	Hosts []HostRecord
	// Staged is the latest renewal read when it was not processed yet
	// (nil: none): the new image processes it at its first pass.
	Staged *StagedRead `json:",omitempty"`
}

// StagedRead is a renewal read not yet processed: the number of records
// it covered and those that differ from the table.
type StagedRead struct {
	Count   int
	Records []StagedRecord
}

// StagedRecord is one host's delta lease record in a StagedRead.
type StagedRecord struct {
	HostID uint64
	Raw    []byte // the record's LeaderSize bytes as read
	OurBit bool   // our bit is set in the host's bitmap
}

// HostRecord is one host_id's entry: what we last read in its delta lease
// and when (our monotime, 0 = never) we processed it, saw it change, and
// accepted its request.
type HostRecord struct {
	HostID          uint64
	LastCheck       uint64
	LastLive        uint64
	LastReq         uint64
	OwnerID         uint64
	OwnerGeneration uint64
	Timestamp       uint64
	IOTimeout       uint16
	OwnerName       string
	LeaseBad        int
}

// Renewal is one renewal history entry.
type Renewal struct {
	Timestamp    uint64
	ReadMs       int64 // -1 if not measured
	WriteMs      int64
	NextTimeouts int
	NextErrors   int
}

// Host is one row of a lockspace's host table. Times are durations
// before State.TakenMono (0 = never).
type Host struct {
	HostID       uint64
	OwnerID      uint64
	Generation   uint64
	Timestamp    uint64
	IOTimeout    uint32
	OwnerName    string
	State        uint32
	LastCheckAgo time.Duration
	LastLiveAgo  time.Duration
	LastReqAgo   time.Duration
	LeaseBad     int
}

// WdmdSession is a lockspace's connection to wdmd.
type WdmdSession struct {
	FD     int // fd table index (required, distinct)
	Name   string
	Active bool   // activated and not yet deactivated
	Expire uint64 // the last expiry time sent to wdmd (wdmd's clock, seconds)
}

// Mode is a lease mode.
type Mode uint8

// The lease modes.
const (
	ModeEX Mode = 1
	ModeSH Mode = 2
)

// String returns "EX" or "SH".
func (m Mode) String() string {
	switch m {
	case ModeEX:
		return "EX"
	case ModeSH:
		return "SH"
	}
	return "mode?"
}

// Disk is one resource disk.
type Disk struct {
	Path   string
	Offset uint64
}

// Leader is the paxos (or delta) leader record as last read or written:
// what a release or a renewal needs without reading the disk first.
type Leader struct {
	Magic           uint32
	Version         uint32
	Flags           uint32
	SectorSize      uint32
	NumHosts        uint64
	MaxHosts        uint64
	OwnerID         uint64
	OwnerGeneration uint64
	Lver            uint64
	SpaceName       string
	ResourceName    string
	Timestamp       uint64
	Checksum        uint32
	IOTimeout       uint16
	WriteID         uint64
	WriteGeneration uint64
	WriteTimestamp  uint64
	// Raw is the whole record as encoded on disk (LeaderSize bytes;
	// format 2, empty before). When set it is authoritative: the fields
	// above are for humans and do not keep the bytes after a name's NUL,
	// which a renewal compares (docs/delta.md "One renewal").
	Raw []byte `json:",omitempty"`
}

// LeaderSize is the size of Leader.Raw when set.
const LeaderSize = 200

// Lease is what a token and an orphan have in common.
type Lease struct {
	Lockspace string // a joined lockspace
	Resource  string // 1..48 bytes
	Disks     []Disk // 1..MaxDisks
	Mode      Mode
	Lver      uint64
	Leader    Leader
	Flags     uint32 // acquire flags (PERSISTENT, ...)
	ResFlags  uint32 // resource flags as requested
	Restrict  uint32
	KillPath  string
	KillArgs  string
	// Hold is the paxos hold as this host keeps it (format 2; nil in a
	// format 1 state, which is then not adoptable).
	Hold *Hold `json:",omitempty"`
}

// Hold is what a paxos hold keeps besides the leader (Lease.Leader, whose
// Raw is then set): our last ballot dblock, the lease's sizes, its mode
// details and its LVB.
type Hold struct {
	Dblock     Dblock
	SectorSize uint32
	AlignSize  uint32
	Shared     bool
	EraseAll   bool
	UndoShared bool
	LVB        []byte `json:",omitempty"` // nil: acquired without LVB
	HasLVB     bool
	LVBDirty   bool
}

// Dblock is a paxos ballot block.
type Dblock struct {
	Mbal, Bal, Inp, Inp2, Inp3, Lver uint64
	Checksum, Flags                  uint32
}

// Token is a resource lease held by a registered client.
type Token struct {
	Lease
	Client int // index into State.Clients; the client is registered
	Pid    int // the holder's pid
}

// Orphan is a persistent lease whose holder went away.
type Orphan struct {
	Lease
	Pid int // the pid that held it
}
