// The wire codec lives in package wire; this file re-exports it so that
// users of this package keep one import.

package client

import (
	"io"

	"github.com/gosanlock/gosanlock/wire"
)

// Re-exports of package wire that are part of this package's API: the
// types its methods take and return, their flags, limits, codec errors and
// text forms. Each is the wire identifier of the same name.

type (
	Cmd         = wire.Cmd
	Disk        = wire.Disk
	EventCB     = wire.EventCB
	Header      = wire.Header
	Host        = wire.Host
	HostEvent   = wire.HostEvent
	Killpath    = wire.Killpath
	Lockspace   = wire.Lockspace
	Options     = wire.Options
	REntry      = wire.REntry
	RIndex      = wire.RIndex
	Reply       = wire.Reply
	Request     = wire.Request
	Resource    = wire.Resource
	State       = wire.State
	StateRecord = wire.StateRecord
)

const (
	AcquireLVB            = wire.AcquireLVB
	AcquireOrphan         = wire.AcquireOrphan
	AcquireOrphanOnly     = wire.AcquireOrphanOnly
	AcquireOwnerNowait    = wire.AcquireOwnerNowait
	AddAsync              = wire.AddAsync
	CBGetEvent            = wire.CBGetEvent
	CBProto               = wire.CBProto
	CmdAcquire            = wire.CmdAcquire
	CmdAddLockspace       = wire.CmdAddLockspace
	CmdAlign              = wire.CmdAlign
	CmdConvert            = wire.CmdConvert
	CmdCreateResource     = wire.CmdCreateResource
	CmdDeleteResource     = wire.CmdDeleteResource
	CmdEndEvent           = wire.CmdEndEvent
	CmdExamineLockspace   = wire.CmdExamineLockspace
	CmdExamineResource    = wire.CmdExamineResource
	CmdFormatRIndex       = wire.CmdFormatRIndex
	CmdGetHosts           = wire.CmdGetHosts
	CmdGetLVB             = wire.CmdGetLVB
	CmdGetLockspaces      = wire.CmdGetLockspaces
	CmdHostStatus         = wire.CmdHostStatus
	CmdInqLockspace       = wire.CmdInqLockspace
	CmdInquire            = wire.CmdInquire
	CmdKillpath           = wire.CmdKillpath
	CmdLogDump            = wire.CmdLogDump
	CmdLookupRIndex       = wire.CmdLookupRIndex
	CmdReadLockspace      = wire.CmdReadLockspace
	CmdReadResource       = wire.CmdReadResource
	CmdReadResourceOwners = wire.CmdReadResourceOwners
	CmdRebuildRIndex      = wire.CmdRebuildRIndex
	CmdReexec             = wire.CmdReexec
	CmdHello              = wire.CmdHello
	CmdRegEvent           = wire.CmdRegEvent
	CmdRegister           = wire.CmdRegister
	CmdRelease            = wire.CmdRelease
	CmdRemLockspace       = wire.CmdRemLockspace
	CmdRenewal            = wire.CmdRenewal
	CmdRequest            = wire.CmdRequest
	CmdRestrict           = wire.CmdRestrict
	CmdSetConfig          = wire.CmdSetConfig
	CmdSetEvent           = wire.CmdSetEvent
	CmdSetHost            = wire.CmdSetHost
	CmdSetLVB             = wire.CmdSetLVB
	CmdShutdown           = wire.CmdShutdown
	CmdShutdownWait       = wire.CmdShutdownWait
	CmdStatus             = wire.CmdStatus
	CmdUpdateRIndex       = wire.CmdUpdateRIndex
	CmdVersion            = wire.CmdVersion
	CmdWriteLockspace     = wire.CmdWriteLockspace
	CmdWriteResource      = wire.CmdWriteResource
	ConfigUnused          = wire.ConfigUnused
	ConfigUnusedByOrphans = wire.ConfigUnusedByOrphans
	ConfigUsed            = wire.ConfigUsed
	ConfigUsedByOrphans   = wire.ConfigUsedByOrphans
	ConvertOwnerNowait    = wire.ConvertOwnerNowait
	DaemonVersion         = wire.DaemonVersion
	DiskSize              = wire.DiskSize
	EventCBSize           = wire.EventCBSize
	HeaderSize            = wire.HeaderSize
	HelperPathLen         = wire.HelperPathLen
	HostDead              = wire.HostDead
	LSFNoTimeout          = wire.LSFNoTimeout
	HostEventSize         = wire.HostEventSize
	HostFail              = wire.HostFail
	HostFree              = wire.HostFree
	HostLive              = wire.HostLive
	HostMask              = wire.HostMask
	HostSize              = wire.HostSize
	HostUnknown           = wire.HostUnknown
	InqWait               = wire.InqWait
	KillpathPID           = wire.KillpathPID
	KillpathSize          = wire.KillpathSize
	LSFAdd                = wire.LSFAdd
	LSFRem                = wire.LSFRem
	LockspaceSize         = wire.LockspaceSize
	Magic                 = wire.Magic
	MaxCmd                = wire.MaxCmd
	MaxDisks              = wire.MaxDisks
	MaxHosts              = wire.MaxHosts
	MaxInquireText        = wire.MaxInquireText
	MaxLVB                = wire.MaxLVB
	MaxLogDump            = wire.MaxLogDump
	MaxResources          = wire.MaxResources
	MaxStateRecords       = wire.MaxStateRecords
	MaxStateText          = wire.MaxStateText
	NameLen               = wire.NameLen
	OptionsSize           = wire.OptionsSize
	PathLen               = wire.PathLen
	ProtoVersion          = wire.ProtoVersion
	REntrySize            = wire.REntrySize
	RIndexSize            = wire.RIndexSize
	RXNoLockspace         = wire.RXNoLockspace
	RXUpAdd               = wire.RXUpAdd
	RXUpRem               = wire.RXUpRem
	RelAll                = wire.RelAll
	RelOrphan             = wire.RelOrphan
	RelRename             = wire.RelRename
	RemAsync              = wire.RemAsync
	RemUnused             = wire.RemUnused
	ReqForce              = wire.ReqForce
	ReqGraceful           = wire.ReqGraceful
	RequestNextLVer       = wire.RequestNextLVer
	ResAlign1M            = wire.ResAlign1M
	ResAlign2M            = wire.ResAlign2M
	ResAlign4M            = wire.ResAlign4M
	ResAlign8M            = wire.ResAlign8M
	ResLVer               = wire.ResLVer
	ResNumHosts           = wire.ResNumHosts
	ResPersistent         = wire.ResPersistent
	ResSector4K           = wire.ResSector4K
	ResSector512          = wire.ResSector512
	ResShared             = wire.ResShared
	ResourceSize          = wire.ResourceSize
	RestrictAll           = wire.RestrictAll
	RestrictSigkill       = wire.RestrictSigkill
	RestrictSigterm       = wire.RestrictSigterm
	SetevAllHosts         = wire.SetevAllHosts
	SetevClearEvent       = wire.SetevClearEvent
	SetevClearHostID      = wire.SetevClearHostID
	SetevCurGeneration    = wire.SetevCurGeneration
	SetevReplaceEvent     = wire.SetevReplaceEvent
	StateClient           = wire.StateClient
	StateDaemon           = wire.StateDaemon
	StateHost             = wire.StateHost
	StateLockspace        = wire.StateLockspace
	StateRenewal          = wire.StateRenewal
	StateWorker           = wire.StateWorker
	StateResourceThread   = wire.StateResourceThread
	StateResource         = wire.StateResource
	StateSize             = wire.StateSize
	WriteClear            = wire.WriteClear
)

var (
	ErrBadMagic        = wire.ErrBadMagic
	ErrBadRecord       = wire.ErrBadRecord
	ErrBadVersion      = wire.ErrBadVersion
	ErrLength          = wire.ErrLength
	ErrNameTooLong     = wire.ErrNameTooLong
	ErrPathTooLong     = wire.ErrPathTooLong
	ErrPayloadTooLarge = wire.ErrPayloadTooLarge
	ErrShortBuffer     = wire.ErrShortBuffer
	ErrTooMany         = wire.ErrTooMany
	ErrTooManyDisks    = wire.ErrTooManyDisks
	ErrUnknownCmd      = wire.ErrUnknownCmd
)

// DecodeName is wire.DecodeName.
func DecodeName(b []byte) string { return wire.DecodeName(b) }

// DecodeReply is wire.DecodeReply.
func DecodeReply(cmd Cmd, b []byte) (*Reply, error) { return wire.DecodeReply(cmd, b) }

// DecodeResourceWithDisks is wire.DecodeResourceWithDisks.
func DecodeResourceWithDisks(src []byte) (Resource, int, error) {
	return wire.DecodeResourceWithDisks(src)
}

// EncodeName is wire.EncodeName.
func EncodeName(s string) ([NameLen]byte, error) { return wire.EncodeName(s) }

// EscapePath is wire.EscapePath.
func EscapePath(p string) string { return wire.EscapePath(p) }

// FormatState is wire.FormatState.
func FormatState(res []Resource) (string, error) { return wire.FormatState(res) }

// HasReply is wire.HasReply.
func HasReply(cmd Cmd) bool { return wire.HasReply(cmd) }

// ImportPath is wire.ImportPath.
func ImportPath(p string) string { return wire.ImportPath(p) }

// LockspaceString is wire.LockspaceString.
func LockspaceString(ls *Lockspace) string { return wire.LockspaceString(ls) }

// NewEventCB is wire.NewEventCB.
func NewEventCB(he HostEvent, fromHostID, fromGeneration uint64) EventCB {
	return wire.NewEventCB(he, fromHostID, fromGeneration)
}

// NewRequest is wire.NewRequest.
func NewRequest(cmd Cmd, cmdFlags, data, data2 uint32) *Request {
	return wire.NewRequest(cmd, cmdFlags, data, data2)
}

// ParseLockspace is wire.ParseLockspace.
func ParseLockspace(s string) *Lockspace { return wire.ParseLockspace(s) }

// ParseOffsetM is wire.ParseOffsetM.
func ParseOffsetM(s string) uint64 { return wire.ParseOffsetM(s) }

// ParseRIndex is wire.ParseRIndex.
func ParseRIndex(s string) *RIndex { return wire.ParseRIndex(s) }

// ParseResource is wire.ParseResource.
func ParseResource(s string) (*Resource, error) { return wire.ParseResource(s) }

// ParseState is wire.ParseState.
func ParseState(s string) ([]Resource, error) { return wire.ParseState(s) }

// ReadReply is wire.ReadReply.
func ReadReply(r io.Reader, cmd Cmd) (*Reply, error) { return wire.ReadReply(r, cmd) }

// ReadStateRecords is wire.ReadStateRecords.
func ReadStateRecords(r io.Reader) ([]StateRecord, error) { return wire.ReadStateRecords(r) }

// ResourceString is wire.ResourceString.
func ResourceString(r *Resource) string { return wire.ResourceString(r) }

// SplitUnescaped is wire.SplitUnescaped.
func SplitUnescaped(s string, n int) []string { return wire.SplitUnescaped(s, n) }
