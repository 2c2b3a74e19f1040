// Package wire is the codec of the sanlock 3.8.5 client/daemon socket
// protocol (described in docs/protocol.md), shared by the client library and
// the daemon:
//
//   - the frame codec: the 32-byte [Header], every fixed structure of
//     docs/protocol.md "Structures" ([Disk], [Resource], [Lockspace], [Options], [Host], [HostEvent], [RIndex],
//     [REntry], [State], [EventCB], [Killpath]) with explicit little-endian
//     encoders and length-checked decoders that never panic;
//   - per-command messages: [Request] / [Reply] with [ReadRequest] (daemon side,
//     framing by command, never by the length field) and [Request.MarshalBinary]
//     (client side, reproducing libsanlock's bytes and length values), and
//     [ReadReply] / [Reply.MarshalBinary] for the other direction;
//   - the text forms of resources and lockspaces ([ParseResource],
//     [FormatState], [LockspaceString], ...).
//
// Header layout (docs/protocol.md "Header"), all fields little-endian u32:
//
//	+-------+---------+-----+-----------+--------+-----+------+-------+
//	| magic | version | cmd | cmd_flags | length | seq | data | data2 |
//	+-------+---------+-----+-----------+--------+-----+------+-------+
//	0       4         8     12          16       20    24     28     32
//
// Result codes travel in data as i32; negative values are reported as
// *rescode.Error, which matches syscall.Errno values with errors.Is. The
// package does no I/O of its own beyond the io.Reader and io.Writer it is
// given, and imports nothing that touches disks.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants (docs/protocol.md "Header"). They are part of the wire format and
// must not be changed.
const (
	Magic        uint32 = 0x04282010 // sm_header.magic
	ProtoVersion uint32 = 0x00000001 // SM_PROTO: major 0 (high 16 bits), minor 1
	CBProto      uint32 = 1          // SM_CB_PROTO, version of event_cb
	CBGetEvent   uint32 = 1          // SM_CB_GET_EVENT, cmd of event_cb

	// DaemonVersion is what a 3.8.5 daemon reports in the VERSION reply:
	// major<<24 | minor<<16 | patch<<8 | build.
	DaemonVersion uint32 = 0x03080500

	HeaderSize = 32
)

// Cmd is an SM_CMD_* command number (docs/protocol.md "Commands").
type Cmd uint32

// Command numbers.
const (
	CmdRegister           Cmd = 1
	CmdAddLockspace       Cmd = 2
	CmdRemLockspace       Cmd = 3
	CmdShutdown           Cmd = 4
	CmdStatus             Cmd = 5
	CmdLogDump            Cmd = 6
	CmdAcquire            Cmd = 7
	CmdRelease            Cmd = 8
	CmdInquire            Cmd = 9
	CmdRestrict           Cmd = 10
	CmdRequest            Cmd = 11
	CmdAlign              Cmd = 12
	CmdExamineLockspace   Cmd = 13
	CmdExamineResource    Cmd = 14
	CmdHostStatus         Cmd = 15
	CmdInqLockspace       Cmd = 16
	CmdKillpath           Cmd = 17
	CmdWriteLockspace     Cmd = 18
	CmdWriteResource      Cmd = 19
	CmdReadLockspace      Cmd = 20
	CmdReadResource       Cmd = 21
	CmdGetLockspaces      Cmd = 22
	CmdGetHosts           Cmd = 23
	CmdReadResourceOwners Cmd = 24
	CmdSetLVB             Cmd = 25
	CmdGetLVB             Cmd = 26
	CmdConvert            Cmd = 27
	CmdVersion            Cmd = 28
	CmdShutdownWait       Cmd = 29
	CmdRegEvent           Cmd = 30
	CmdEndEvent           Cmd = 31
	CmdSetEvent           Cmd = 32
	CmdSetConfig          Cmd = 33
	CmdRenewal            Cmd = 34
	CmdFormatRIndex       Cmd = 35
	CmdUpdateRIndex       Cmd = 36
	CmdLookupRIndex       Cmd = 37
	CmdCreateResource     Cmd = 38
	CmdDeleteResource     Cmd = 39
	CmdRebuildRIndex      Cmd = 40

	// MaxCmd385 is the highest command number of sanlock 3.8.5.
	MaxCmd385 = CmdRebuildRIndex

	// Commands added by sanlock 5.x (docs/protocol.md "Commands of
	// sanlock 5.1.1"). The daemon frames their payloads; what it answers
	// is in daemon/cmds.go.
	CmdAcquire2          Cmd = 41 // acquire, and the owner when held
	CmdReadLockspaceHost Cmd = 42 // one host's delta lease record
	CmdInitLockspaceHost Cmd = 43 // write one host's delta lease
	CmdSetHost           Cmd = 44 // data = subcommand (1: DEAD_EXT)

	// MaxCmd is the highest sanlock command number this package knows.
	MaxCmd = CmdSetHost
)

// gosanlock's own commands (docs/protocol.md "Private commands") travel
// under their own header magic, PrivateMagic, with numbers from
// PrivateCmdBase on. A sanlock client never sends that magic, and no
// sanlock command number will reach that range, so a C client can never
// hit one of them; a C daemon ignores a header whose magic is not its own.
// ReadRequest accepts a private command only under PrivateMagic and a
// sanlock command only under Magic.
const (
	// PrivateMagic is the header magic of gosanlock's own commands: the
	// bytes "GOSL" on the wire.
	PrivateMagic uint32 = 0x4c534f47

	// PrivateCmdBase is the first number of the private range.
	PrivateCmdBase Cmd = 0x47530000

	// CmdReexec asks the daemon to hand over to a new image of its own
	// binary (docs/upgrade.md). No payload: the daemon decides what it
	// executes, never the client (docs/security.md "Re-exec"). Reply:
	// result, then on failure one record whose text says why.
	CmdReexec Cmd = PrivateCmdBase + 1

	// CmdHello asks whether the daemon serves private commands: a
	// gosanlock daemon answers 0 at once, a sanlock daemon not at all.
	// No payload; reply: result.
	CmdHello Cmd = PrivateCmdBase + 2

	// CmdLastError asks for the last failure the daemon recorded for the
	// asking process (its SO_PEERCRED pid, on any of its connections): a
	// gosanlock client sends it after a command failed, to learn why. No
	// payload; reply: result (0, or -ENOENT when nothing is recorded),
	// then on 0 one StateLastError record; the connection is then closed.
	CmdLastError Cmd = PrivateCmdBase + 3

	// maxPrivateCmd is the highest private command number.
	maxPrivateCmd = CmdLastError
)

var cmdNames = [...]struct{ name, debug string }{
	CmdRegister:           {"SM_CMD_REGISTER", "register"},
	CmdAddLockspace:       {"SM_CMD_ADD_LOCKSPACE", "add_lockspace"},
	CmdRemLockspace:       {"SM_CMD_REM_LOCKSPACE", "rem_lockspace"},
	CmdShutdown:           {"SM_CMD_SHUTDOWN", "shutdown"},
	CmdStatus:             {"SM_CMD_STATUS", "status"},
	CmdLogDump:            {"SM_CMD_LOG_DUMP", "log_dump"},
	CmdAcquire:            {"SM_CMD_ACQUIRE", "acquire"},
	CmdRelease:            {"SM_CMD_RELEASE", "release"},
	CmdInquire:            {"SM_CMD_INQUIRE", "inquire"},
	CmdRestrict:           {"SM_CMD_RESTRICT", "restrict"},
	CmdRequest:            {"SM_CMD_REQUEST", "request"},
	CmdAlign:              {"SM_CMD_ALIGN", "align"},
	CmdExamineLockspace:   {"SM_CMD_EXAMINE_LOCKSPACE", "examine_lockspace"},
	CmdExamineResource:    {"SM_CMD_EXAMINE_RESOURCE", "examine_resource"},
	CmdHostStatus:         {"SM_CMD_HOST_STATUS", "host_status"},
	CmdInqLockspace:       {"SM_CMD_INQ_LOCKSPACE", "inq_lockspace"},
	CmdKillpath:           {"SM_CMD_KILLPATH", "killpath"},
	CmdWriteLockspace:     {"SM_CMD_WRITE_LOCKSPACE", "write_lockspace"},
	CmdWriteResource:      {"SM_CMD_WRITE_RESOURCE", "write_resource"},
	CmdReadLockspace:      {"SM_CMD_READ_LOCKSPACE", "read_lockspace"},
	CmdReadResource:       {"SM_CMD_READ_RESOURCE", "read_resource"},
	CmdGetLockspaces:      {"SM_CMD_GET_LOCKSPACES", "get_lockspaces"},
	CmdGetHosts:           {"SM_CMD_GET_HOSTS", "get_hosts"},
	CmdReadResourceOwners: {"SM_CMD_READ_RESOURCE_OWNERS", "read_resource_owners"},
	CmdSetLVB:             {"SM_CMD_SET_LVB", "set_lvb"},
	CmdGetLVB:             {"SM_CMD_GET_LVB", "get_lvb"},
	CmdConvert:            {"SM_CMD_CONVERT", "convert"},
	CmdVersion:            {"SM_CMD_VERSION", "version"},
	CmdShutdownWait:       {"SM_CMD_SHUTDOWN_WAIT", "shutdown_wait"},
	CmdRegEvent:           {"SM_CMD_REG_EVENT", "reg_event"},
	CmdEndEvent:           {"SM_CMD_END_EVENT", "end_event"},
	CmdSetEvent:           {"SM_CMD_SET_EVENT", "set_event"},
	CmdSetConfig:          {"SM_CMD_SET_CONFIG", "set_config"},
	CmdRenewal:            {"SM_CMD_RENEWAL", "renewal"},
	CmdFormatRIndex:       {"SM_CMD_FORMAT_RINDEX", "format_rindex"},
	CmdUpdateRIndex:       {"SM_CMD_UPDATE_RINDEX", "update_rindex"},
	CmdLookupRIndex:       {"SM_CMD_LOOKUP_RINDEX", "lookup_rindex"},
	CmdCreateResource:     {"SM_CMD_CREATE_RESOURCE", "create_resource"},
	CmdDeleteResource:     {"SM_CMD_DELETE_RESOURCE", "delete_resource"},
	CmdRebuildRIndex:      {"SM_CMD_REBUILD_RINDEX", "rebuild_rindex"},
	CmdAcquire2:           {"SM_CMD_ACQUIRE2", "acquire2"},
	CmdReadLockspaceHost:  {"SM_CMD_READ_LOCKSPACE_HOST", "read_lockspace_host"},
	CmdInitLockspaceHost:  {"SM_CMD_INIT_LOCKSPACE_HOST", "init_lockspace_host"},
	CmdSetHost:            {"SM_CMD_SET_HOST", "set_host"},
}

var privateCmdNames = [...]struct{ name, debug string }{
	CmdReexec - PrivateCmdBase:    {"GOSL_CMD_REEXEC", "reexec"},
	CmdHello - PrivateCmdBase:     {"GOSL_CMD_HELLO", "hello"},
	CmdLastError - PrivateCmdBase: {"GOSL_CMD_LAST_ERROR", "last_error"},
}

// Valid reports whether c is a sanlock command this package knows
// (1..MaxCmd) or one of gosanlock's own (Private).
func (c Cmd) Valid() bool { return c.Sanlock() || c.Private() }

// Sanlock reports whether c is a sanlock command number this package
// knows (1..MaxCmd).
func (c Cmd) Sanlock() bool { return c >= CmdRegister && c <= MaxCmd }

// Private reports whether c is one of gosanlock's own commands.
func (c Cmd) Private() bool { return c > PrivateCmdBase && c <= maxPrivateCmd }

// HeaderMagic is the magic a request of c carries: PrivateMagic for a
// private command, Magic otherwise.
func (c Cmd) HeaderMagic() uint32 {
	if c.Private() {
		return PrivateMagic
	}
	return Magic
}

func (c Cmd) names() (name, debug string, ok bool) {
	switch {
	case c.Sanlock():
		n := cmdNames[c]
		return n.name, n.debug, true
	case c.Private():
		n := privateCmdNames[c-PrivateCmdBase]
		return n.name, n.debug, true
	}
	return "", "", false
}

// String returns the command's name, or "SM_CMD_<n>" for unknown numbers.
func (c Cmd) String() string {
	if name, _, ok := c.names(); ok {
		return name
	}
	return fmt.Sprintf("SM_CMD_%d", uint32(c))
}

// DebugName returns the spelling used by the debug_cmd config key and in logs
// (docs/protocol.md "Commands"), or "cmd<n>" for unknown numbers.
func (c Cmd) DebugName() string {
	if _, debug, ok := c.names(); ok {
		return debug
	}
	return fmt.Sprintf("cmd%d", uint32(c))
}

// CmdByDebugName maps a debug name ("add_lockspace") back to its sanlock
// command (private commands have no debug_cmd entry).
func CmdByDebugName(name string) (Cmd, bool) {
	for c := CmdRegister; c <= MaxCmd; c++ {
		if cmdNames[c].debug == name {
			return c, true
		}
	}
	return 0, false
}

// Per-command flags (docs/protocol.md "Flags").
const (
	AddAsync      = 0x1 // SANLK_ADD_ASYNC
	AddNoDelay    = 0x2 // SANLK_ADD_NODELAY (5.x): skip the wait for another host on the host_id
	AddNoWatchdog = 0x4 // SANLK_ADD_NO_WATCHDOG (5.x)

	GetHostsLocal = 0x1 // GET_HOSTS (5.x): this host's record only

	WriteLSFlags  = 0x1 // SANLK_WRITE_LS_FLAGS (5.x, WRITE_LOCKSPACE): rewrite the leader flags only
	WriteLSUseCAW = 0x2 // SANLK_WRITE_LS_USE_CAW (5.x)
	WriteLSNoCAW  = 0x4 // SANLK_WRITE_LS_NO_CAW (5.x)
	WriteUseCAW   = 0x2 // SANLK_WRITE_USE_CAW (5.x, WRITE_RESOURCE)
	WriteNoCAW    = 0x4 // SANLK_WRITE_NO_CAW (5.x, WRITE_RESOURCE)

	InitHostUseCAW = 0x1 // SANLK_INIT_HOST_USE_CAW (INIT_LOCKSPACE_HOST)
	InitHostNoCAW  = 0x2 // SANLK_INIT_HOST_NO_CAW

	// ForClientID (3.9.5+) on ACQUIRE, RELEASE, INQUIRE, CONVERT (and
	// ACQUIRE2): header.data2 is a client index (ci= of STATUS's CLIENT
	// record) instead of a pid.
	ForClientID = 0x10

	RemAsync  = 0x1 // SANLK_REM_ASYNC
	RemUnused = 0x2 // SANLK_REM_UNUSED

	InqWait = 0x1 // SANLK_INQ_WAIT

	WriteClear = 0x1 // SANLK_WRITE_CLEAR

	// RestrictAll, RestrictSigkill, RestrictSigterm: restrict.go.

	KillpathPID = 0x1 // SANLK_KILLPATH_PID

	AcquireLVB         = 0x1 // SANLK_ACQUIRE_LVB
	AcquireOrphan      = 0x2 // SANLK_ACQUIRE_ORPHAN
	AcquireOrphanOnly  = 0x4 // SANLK_ACQUIRE_ORPHAN_ONLY
	AcquireOwnerNowait = 0x8 // SANLK_ACQUIRE_OWNER_NOWAIT

	RelAll    = 0x1 // SANLK_REL_ALL
	RelRename = 0x2 // SANLK_REL_RENAME
	RelOrphan = 0x4 // SANLK_REL_ORPHAN
	RelNoDisk = 0x8 // SANLK_REL_NO_DISK (5.x): drop the lease here, leave the leader owned on disk

	ConvertOwnerNowait = 0x8 // SANLK_CONVERT_OWNER_NOWAIT

	RequestNextLVer = 0x1 // SANLK_REQUEST_NEXT_LVER
	ReqForce        = 1   // SANLK_REQ_FORCE (REQUEST header.data)
	ReqGraceful     = 2   // SANLK_REQ_GRACEFUL (REQUEST header.data)

	ConfigUsed            = 0x1  // SANLK_CONFIG_USED (SET_CONFIG header.data)
	ConfigUnused          = 0x2  // SANLK_CONFIG_UNUSED
	ConfigUsedByOrphans   = 0x4  // SANLK_CONFIG_USED_BY_ORPHANS
	ConfigUnusedByOrphans = 0x8  // SANLK_CONFIG_UNUSED_BY_ORPHANS
	ConfigIOTimeout       = 0x10 // SANLK_CONFIG_IO_TIMEOUT (5.x): data2 = the new io_timeout

	SetevCurGeneration = 0x01 // SANLK_SETEV_CUR_GENERATION
	SetevClearHostID   = 0x02 // SANLK_SETEV_CLEAR_HOSTID
	SetevClearEvent    = 0x04 // SANLK_SETEV_CLEAR_EVENT
	SetevReplaceEvent  = 0x08 // SANLK_SETEV_REPLACE_EVENT
	SetevAllHosts      = 0x10 // SANLK_SETEV_ALL_HOSTS

	RXNoLockspace = 0x1     // SANLK_RX_NO_LOCKSPACE
	RXUpAdd       = 0x10000 // SANLK_RXUP_ADD
	RXUpRem       = 0x20000 // SANLK_RXUP_REM
)

// Resource / rindex / lockspace flags (docs/protocol.md "Structures").
const (
	ResLVer       = 0x001 // SANLK_RES_LVER
	ResNumHosts   = 0x002 // SANLK_RES_NUM_HOSTS
	ResShared     = 0x004 // SANLK_RES_SHARED
	ResPersistent = 0x008 // SANLK_RES_PERSISTENT
	ResAlign1M    = 0x010 // SANLK_RES_ALIGN1M (also SANLK_RIF_*, SANLK_LSF_*)
	ResAlign2M    = 0x020
	ResAlign4M    = 0x040
	ResAlign8M    = 0x080
	ResSector512  = 0x100
	ResSector4K   = 0x200

	LSFAdd = 0x1 // SANLK_LSF_ADD: lockspace being added (GET_LOCKSPACES)
	LSFRem = 0x2 // SANLK_LSF_REM: lockspace being removed
	// LSFNoTimeout (5.x): the lockspace's host leases are NO_TIMEOUT
	// (GET_LOCKSPACES; `client gets` prints "NO_TIMEOUT").
	LSFNoTimeout = 0x4
	// LSFUsingCAW (5.x): in the flags READ_LOCKSPACE(_HOST) answers, the
	// delta lease carries the CAW mark.
	LSFUsingCAW = 0x8
)

// Host states in the low 4 bits of sanlk_host.flags (docs/protocol.md "Host states").
const (
	HostUnknown = 1
	HostFree    = 2
	HostLive    = 3
	HostFail    = 4
	HostDead    = 5
	HostMask    = 0xF
)

// sanlk_state types (docs/protocol.md "Structures"); also the STATUS detail levels.
const (
	StateDaemon    = 1
	StateClient    = 2
	StateLockspace = 3
	StateResource  = 4
	StateHost      = 5
	StateRenewal   = 6
	// StateWorker and StateResourceThread are the records of a worker
	// thread (data32: its number) and of the resource thread that
	// 3.9.5's and 5.1.1's STATUS send after DAEMON; the CLI prints them
	// with -D only. Our daemon sends neither.
	StateWorker         = 7
	StateResourceThread = 8
	// StateLastError is the one record of a CmdLastError reply (a
	// private command; sanlock never sends it): flags the failed
	// command's result (an int32), data32 the command number, data64 the
	// failure's age in milliseconds, name the command's debug name, text
	// the cause (may be empty).
	StateLastError = 0x47530001
)

// Limits (docs/protocol.md "Structures").
const (
	NameLen       = 48   // SANLK_NAME_LEN
	PathLen       = 1024 // SANLK_PATH_LEN (max 1023 chars + NUL)
	HelperPathLen = 128  // killpath path/args field size
	MaxDisks      = 4    // SANLK_MAX_DISKS
	MaxResources  = 8    // SANLK_MAX_RESOURCES per ACQUIRE
	MaxStateText  = 4096 // sanlk_state.str_len maximum
	MaxLVB        = 4096 // largest LVB
	MaxHosts      = 2000
)

// Sentinel errors of the codec. ReadRequest returns the first three for
// headers a daemon must never answer (docs/protocol.md "Header"); it should close the
// connection.
var (
	ErrBadMagic        = errors.New("sanlock proto: bad magic")
	ErrBadVersion      = errors.New("sanlock proto: unsupported protocol major version")
	ErrUnknownCmd      = errors.New("sanlock proto: unknown command")
	ErrPayloadTooLarge = errors.New("sanlock proto: message length over limit")
	ErrShortBuffer     = errors.New("sanlock proto: buffer too short")
	ErrLength          = errors.New("sanlock proto: wrong structure length")
	ErrNameTooLong     = errors.New("sanlock proto: name longer than 48 bytes")
	ErrPathTooLong     = errors.New("sanlock proto: path longer than 1023 bytes")
	ErrBadRecord       = errors.New("sanlock proto: malformed reply record")
	ErrTooManyDisks    = errors.New("sanlock proto: num_disks out of range")
	ErrTooMany         = errors.New("sanlock proto: count over limit")
)

// Header is sm_header (docs/protocol.md "Header").
type Header struct {
	Magic    uint32
	Version  uint32
	Cmd      Cmd
	CmdFlags uint32
	Length   uint32
	Seq      uint32
	Data     uint32
	Data2    uint32
}

// Header field offsets (docs/protocol.md "Header").
const (
	hdrMagic    = 0
	hdrVersion  = 4
	hdrCmd      = 8
	hdrCmdFlags = 12
	hdrLength   = 16
	hdrSeq      = 20
	hdrData     = 24
	hdrData2    = 28
)

var le = binary.LittleEndian

// NewHeader returns a request header as libsanlock fills it: magic, SM_PROTO,
// cmd, flags, data, data2; Length is set when the request is marshalled.
func NewHeader(cmd Cmd, cmdFlags, data, data2 uint32) Header {
	return Header{Magic: cmd.HeaderMagic(), Version: ProtoVersion, Cmd: cmd, CmdFlags: cmdFlags,
		Length: HeaderSize, Data: data, Data2: data2}
}

// Encode writes the header into dst[:32]. It returns ErrShortBuffer when dst
// is too small.
func (h *Header) Encode(dst []byte) error {
	if len(dst) < HeaderSize {
		return ErrShortBuffer
	}
	le.PutUint32(dst[hdrMagic:], h.Magic)
	le.PutUint32(dst[hdrVersion:], h.Version)
	le.PutUint32(dst[hdrCmd:], uint32(h.Cmd))
	le.PutUint32(dst[hdrCmdFlags:], h.CmdFlags)
	le.PutUint32(dst[hdrLength:], h.Length)
	le.PutUint32(dst[hdrSeq:], h.Seq)
	le.PutUint32(dst[hdrData:], h.Data)
	le.PutUint32(dst[hdrData2:], h.Data2)
	return nil
}

// Bytes returns the 32-byte encoding.
func (h *Header) Bytes() []byte {
	var b [HeaderSize]byte
	_ = h.Encode(b[:])
	return b[:]
}

// AppendBinary appends the 32-byte encoding to b.
func (h *Header) AppendBinary(b []byte) ([]byte, error) {
	return append(b, h.Bytes()...), nil
}

// Decode reads src[:32] without validating any field.
func (h *Header) Decode(src []byte) error {
	if len(src) < HeaderSize {
		return ErrShortBuffer
	}
	h.Magic = le.Uint32(src[hdrMagic:])
	h.Version = le.Uint32(src[hdrVersion:])
	h.Cmd = Cmd(le.Uint32(src[hdrCmd:]))
	h.CmdFlags = le.Uint32(src[hdrCmdFlags:])
	h.Length = le.Uint32(src[hdrLength:])
	h.Seq = le.Uint32(src[hdrSeq:])
	h.Data = le.Uint32(src[hdrData:])
	h.Data2 = le.Uint32(src[hdrData2:])
	return nil
}

// UnmarshalBinary decodes exactly 32 bytes.
func (h *Header) UnmarshalBinary(src []byte) error {
	if len(src) != HeaderSize {
		return ErrLength
	}
	return h.Decode(src)
}

// MarshalBinary returns the 32-byte encoding.
func (h *Header) MarshalBinary() ([]byte, error) { return h.Bytes(), nil }

// Validate applies the daemon's acceptance rules of docs/protocol.md "Header" in order:
// magic, then protocol major version (ignored for VERSION), then command:
// a sanlock command under Magic, a private one under PrivateMagic
// (docs/protocol.md "Private commands").
func (h *Header) Validate() error {
	switch h.Magic {
	case Magic:
		if h.Cmd != CmdVersion && h.Version&0xFFFF0000 != 0 {
			return ErrBadVersion
		}
		if !h.Cmd.Sanlock() {
			return ErrUnknownCmd
		}
	case PrivateMagic:
		if h.Version&0xFFFF0000 != 0 {
			return ErrBadVersion
		}
		if !h.Cmd.Private() {
			return ErrUnknownCmd
		}
	default:
		return ErrBadMagic
	}
	return nil
}

// Result returns data as the signed result of a reply.
func (h *Header) Result() int32 { return int32(h.Data) }

// Data2Int returns data2 as a signed value (pid, -1 for self).
func (h *Header) Data2Int() int32 { return int32(h.Data2) }

// ResultReply builds the "result reply" of docs/protocol.md "Header" for request header
// req: cmd/cmd_flags/seq echoed, magic sanlock's (PrivateMagic for a
// private request), version 1, length 32, data=result, data2=0.
func ResultReply(req Header, result int32) Header {
	magic := Magic
	if req.Magic == PrivateMagic {
		magic = PrivateMagic
	}
	return Header{Magic: magic, Version: ProtoVersion, Cmd: req.Cmd, CmdFlags: req.CmdFlags,
		Length: HeaderSize, Seq: req.Seq, Data: uint32(result)}
}

// VersionReply builds the VERSION reply header (docs/protocol.md "Commands").
func VersionReply(daemonVersion uint32) Header {
	return Header{Magic: Magic, Version: ProtoVersion, Cmd: CmdVersion, Length: HeaderSize,
		Data2: daemonVersion}
}

// ShutdownWaitFinalReply is the header sent when the daemon exits after
// SHUTDOWN_WAIT: everything 0 except magic, version and length (docs/protocol.md "Commands").
func ShutdownWaitFinalReply() Header {
	return Header{Magic: Magic, Version: ProtoVersion, Length: HeaderSize}
}
