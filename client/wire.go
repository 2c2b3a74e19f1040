// The wire codec lives in package wire; this file re-exports it so that
// users of this package keep one import.

package client

import (
	"io"

	"github.com/gosanlock/gosanlock/wire"
)

// Re-exports of package wire that are part of this package's API: the
// types its methods take and return, their flags, limits and text forms.

// AcquireLVB is wire.AcquireLVB.
const AcquireLVB = wire.AcquireLVB

// AcquireOrphan is wire.AcquireOrphan.
const AcquireOrphan = wire.AcquireOrphan

// AcquireOrphanOnly is wire.AcquireOrphanOnly.
const AcquireOrphanOnly = wire.AcquireOrphanOnly

// AcquireOwnerNowait is wire.AcquireOwnerNowait.
const AcquireOwnerNowait = wire.AcquireOwnerNowait

// AddAsync is wire.AddAsync.
const AddAsync = wire.AddAsync

// CBGetEvent is wire.CBGetEvent.
const CBGetEvent = wire.CBGetEvent

// CBProto is wire.CBProto.
const CBProto = wire.CBProto

// Cmd is wire.Cmd.
type Cmd = wire.Cmd

// CmdAcquire is wire.CmdAcquire.
const CmdAcquire = wire.CmdAcquire

// CmdAddLockspace is wire.CmdAddLockspace.
const CmdAddLockspace = wire.CmdAddLockspace

// CmdAlign is wire.CmdAlign.
const CmdAlign = wire.CmdAlign

// CmdConvert is wire.CmdConvert.
const CmdConvert = wire.CmdConvert

// CmdCreateResource is wire.CmdCreateResource.
const CmdCreateResource = wire.CmdCreateResource

// CmdDeleteResource is wire.CmdDeleteResource.
const CmdDeleteResource = wire.CmdDeleteResource

// CmdEndEvent is wire.CmdEndEvent.
const CmdEndEvent = wire.CmdEndEvent

// CmdExamineLockspace is wire.CmdExamineLockspace.
const CmdExamineLockspace = wire.CmdExamineLockspace

// CmdExamineResource is wire.CmdExamineResource.
const CmdExamineResource = wire.CmdExamineResource

// CmdFormatRIndex is wire.CmdFormatRIndex.
const CmdFormatRIndex = wire.CmdFormatRIndex

// CmdGetHosts is wire.CmdGetHosts.
const CmdGetHosts = wire.CmdGetHosts

// CmdGetLVB is wire.CmdGetLVB.
const CmdGetLVB = wire.CmdGetLVB

// CmdGetLockspaces is wire.CmdGetLockspaces.
const CmdGetLockspaces = wire.CmdGetLockspaces

// CmdHostStatus is wire.CmdHostStatus.
const CmdHostStatus = wire.CmdHostStatus

// CmdInqLockspace is wire.CmdInqLockspace.
const CmdInqLockspace = wire.CmdInqLockspace

// CmdInquire is wire.CmdInquire.
const CmdInquire = wire.CmdInquire

// CmdKillpath is wire.CmdKillpath.
const CmdKillpath = wire.CmdKillpath

// CmdLogDump is wire.CmdLogDump.
const CmdLogDump = wire.CmdLogDump

// CmdLookupRIndex is wire.CmdLookupRIndex.
const CmdLookupRIndex = wire.CmdLookupRIndex

// CmdReadLockspace is wire.CmdReadLockspace.
const CmdReadLockspace = wire.CmdReadLockspace

// CmdReadResource is wire.CmdReadResource.
const CmdReadResource = wire.CmdReadResource

// CmdReadResourceOwners is wire.CmdReadResourceOwners.
const CmdReadResourceOwners = wire.CmdReadResourceOwners

// CmdRebuildRIndex is wire.CmdRebuildRIndex.
const CmdRebuildRIndex = wire.CmdRebuildRIndex

// CmdRegEvent is wire.CmdRegEvent.
const CmdRegEvent = wire.CmdRegEvent

// CmdRegister is wire.CmdRegister.
const CmdRegister = wire.CmdRegister

// CmdRelease is wire.CmdRelease.
const CmdRelease = wire.CmdRelease

// CmdRemLockspace is wire.CmdRemLockspace.
const CmdRemLockspace = wire.CmdRemLockspace

// CmdRenewal is wire.CmdRenewal.
const CmdRenewal = wire.CmdRenewal

// CmdRequest is wire.CmdRequest.
const CmdRequest = wire.CmdRequest

// CmdRestrict is wire.CmdRestrict.
const CmdRestrict = wire.CmdRestrict

// CmdSetConfig is wire.CmdSetConfig.
const CmdSetConfig = wire.CmdSetConfig

// CmdSetEvent is wire.CmdSetEvent.
const CmdSetEvent = wire.CmdSetEvent

// CmdSetLVB is wire.CmdSetLVB.
const CmdSetLVB = wire.CmdSetLVB

// CmdShutdown is wire.CmdShutdown.
const CmdShutdown = wire.CmdShutdown

// CmdShutdownWait is wire.CmdShutdownWait.
const CmdShutdownWait = wire.CmdShutdownWait

// CmdStatus is wire.CmdStatus.
const CmdStatus = wire.CmdStatus

// CmdUpdateRIndex is wire.CmdUpdateRIndex.
const CmdUpdateRIndex = wire.CmdUpdateRIndex

// CmdVersion is wire.CmdVersion.
const CmdVersion = wire.CmdVersion

// CmdWriteLockspace is wire.CmdWriteLockspace.
const CmdWriteLockspace = wire.CmdWriteLockspace

// CmdWriteResource is wire.CmdWriteResource.
const CmdWriteResource = wire.CmdWriteResource

// ConfigUnused is wire.ConfigUnused.
const ConfigUnused = wire.ConfigUnused

// ConfigUnusedByOrphans is wire.ConfigUnusedByOrphans.
const ConfigUnusedByOrphans = wire.ConfigUnusedByOrphans

// ConfigUsed is wire.ConfigUsed.
const ConfigUsed = wire.ConfigUsed

// ConfigUsedByOrphans is wire.ConfigUsedByOrphans.
const ConfigUsedByOrphans = wire.ConfigUsedByOrphans

// ConvertOwnerNowait is wire.ConvertOwnerNowait.
const ConvertOwnerNowait = wire.ConvertOwnerNowait

// DaemonVersion is wire.DaemonVersion.
const DaemonVersion = wire.DaemonVersion

// DecodeName is wire.DecodeName.
func DecodeName(b []byte) string { return wire.DecodeName(b) }

// DecodeReply is wire.DecodeReply.
func DecodeReply(cmd Cmd, b []byte) (*Reply, error) { return wire.DecodeReply(cmd, b) }

// DecodeResourceWithDisks is wire.DecodeResourceWithDisks.
func DecodeResourceWithDisks(src []byte) (Resource, int, error) {
	return wire.DecodeResourceWithDisks(src)
}

// Disk is wire.Disk.
type Disk = wire.Disk

// DiskSize is wire.DiskSize.
const DiskSize = wire.DiskSize

// EncodeName is wire.EncodeName.
func EncodeName(s string) ([NameLen]byte, error) { return wire.EncodeName(s) }

// ErrBadMagic is wire.ErrBadMagic.
var ErrBadMagic = wire.ErrBadMagic

// ErrBadRecord is wire.ErrBadRecord.
var ErrBadRecord = wire.ErrBadRecord

// ErrBadVersion is wire.ErrBadVersion.
var ErrBadVersion = wire.ErrBadVersion

// ErrLength is wire.ErrLength.
var ErrLength = wire.ErrLength

// ErrNameTooLong is wire.ErrNameTooLong.
var ErrNameTooLong = wire.ErrNameTooLong

// ErrPathTooLong is wire.ErrPathTooLong.
var ErrPathTooLong = wire.ErrPathTooLong

// ErrPayloadTooLarge is wire.ErrPayloadTooLarge.
var ErrPayloadTooLarge = wire.ErrPayloadTooLarge

// ErrShortBuffer is wire.ErrShortBuffer.
var ErrShortBuffer = wire.ErrShortBuffer

// ErrTooMany is wire.ErrTooMany.
var ErrTooMany = wire.ErrTooMany

// ErrTooManyDisks is wire.ErrTooManyDisks.
var ErrTooManyDisks = wire.ErrTooManyDisks

// ErrUnknownCmd is wire.ErrUnknownCmd.
var ErrUnknownCmd = wire.ErrUnknownCmd

// EscapePath is wire.EscapePath.
func EscapePath(p string) string { return wire.EscapePath(p) }

// EventCB is wire.EventCB.
type EventCB = wire.EventCB

// EventCBSize is wire.EventCBSize.
const EventCBSize = wire.EventCBSize

// FormatState is wire.FormatState.
func FormatState(res []Resource) (string, error) { return wire.FormatState(res) }

// HasReply is wire.HasReply.
func HasReply(cmd Cmd) bool { return wire.HasReply(cmd) }

// Header is wire.Header.
type Header = wire.Header

// HeaderSize is wire.HeaderSize.
const HeaderSize = wire.HeaderSize

// HelperPathLen is wire.HelperPathLen.
const HelperPathLen = wire.HelperPathLen

// Host is wire.Host.
type Host = wire.Host

// HostDead is wire.HostDead.
const HostDead = wire.HostDead

// HostEvent is wire.HostEvent.
type HostEvent = wire.HostEvent

// HostEventSize is wire.HostEventSize.
const HostEventSize = wire.HostEventSize

// HostFail is wire.HostFail.
const HostFail = wire.HostFail

// HostFree is wire.HostFree.
const HostFree = wire.HostFree

// HostLive is wire.HostLive.
const HostLive = wire.HostLive

// HostMask is wire.HostMask.
const HostMask = wire.HostMask

// HostSize is wire.HostSize.
const HostSize = wire.HostSize

// HostUnknown is wire.HostUnknown.
const HostUnknown = wire.HostUnknown

// ImportPath is wire.ImportPath.
func ImportPath(p string) string { return wire.ImportPath(p) }

// InqWait is wire.InqWait.
const InqWait = wire.InqWait

// Killpath is wire.Killpath.
type Killpath = wire.Killpath

// KillpathPID is wire.KillpathPID.
const KillpathPID = wire.KillpathPID

// KillpathSize is wire.KillpathSize.
const KillpathSize = wire.KillpathSize

// LSFAdd is wire.LSFAdd.
const LSFAdd = wire.LSFAdd

// LSFRem is wire.LSFRem.
const LSFRem = wire.LSFRem

// Lockspace is wire.Lockspace.
type Lockspace = wire.Lockspace

// LockspaceSize is wire.LockspaceSize.
const LockspaceSize = wire.LockspaceSize

// LockspaceString is wire.LockspaceString.
func LockspaceString(ls *Lockspace) string { return wire.LockspaceString(ls) }

// Magic is wire.Magic.
const Magic = wire.Magic

// MaxCmd is wire.MaxCmd.
const MaxCmd = wire.MaxCmd

// MaxDisks is wire.MaxDisks.
const MaxDisks = wire.MaxDisks

// MaxHosts is wire.MaxHosts.
const MaxHosts = wire.MaxHosts

// MaxInquireText is wire.MaxInquireText.
const MaxInquireText = wire.MaxInquireText

// MaxLVB is wire.MaxLVB.
const MaxLVB = wire.MaxLVB

// MaxLogDump is wire.MaxLogDump.
const MaxLogDump = wire.MaxLogDump

// MaxResources is wire.MaxResources.
const MaxResources = wire.MaxResources

// MaxStateRecords is wire.MaxStateRecords.
const MaxStateRecords = wire.MaxStateRecords

// MaxStateText is wire.MaxStateText.
const MaxStateText = wire.MaxStateText

// NameLen is wire.NameLen.
const NameLen = wire.NameLen

// NewEventCB is wire.NewEventCB.
func NewEventCB(he HostEvent, fromHostID, fromGeneration uint64) EventCB {
	return wire.NewEventCB(he, fromHostID, fromGeneration)
}

// NewRequest is wire.NewRequest.
func NewRequest(cmd Cmd, cmdFlags, data, data2 uint32) *Request {
	return wire.NewRequest(cmd, cmdFlags, data, data2)
}

// Options is wire.Options.
type Options = wire.Options

// OptionsSize is wire.OptionsSize.
const OptionsSize = wire.OptionsSize

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

// PathLen is wire.PathLen.
const PathLen = wire.PathLen

// ProtoVersion is wire.ProtoVersion.
const ProtoVersion = wire.ProtoVersion

// REntry is wire.REntry.
type REntry = wire.REntry

// REntrySize is wire.REntrySize.
const REntrySize = wire.REntrySize

// RIndex is wire.RIndex.
type RIndex = wire.RIndex

// RIndexSize is wire.RIndexSize.
const RIndexSize = wire.RIndexSize

// RXNoLockspace is wire.RXNoLockspace.
const RXNoLockspace = wire.RXNoLockspace

// RXUpAdd is wire.RXUpAdd.
const RXUpAdd = wire.RXUpAdd

// RXUpRem is wire.RXUpRem.
const RXUpRem = wire.RXUpRem

// ReadReply is wire.ReadReply.
func ReadReply(r io.Reader, cmd Cmd) (*Reply, error) { return wire.ReadReply(r, cmd) }

// ReadStateRecords is wire.ReadStateRecords.
func ReadStateRecords(r io.Reader) ([]StateRecord, error) { return wire.ReadStateRecords(r) }

// RelAll is wire.RelAll.
const RelAll = wire.RelAll

// RelOrphan is wire.RelOrphan.
const RelOrphan = wire.RelOrphan

// RelRename is wire.RelRename.
const RelRename = wire.RelRename

// RemAsync is wire.RemAsync.
const RemAsync = wire.RemAsync

// RemUnused is wire.RemUnused.
const RemUnused = wire.RemUnused

// Reply is wire.Reply.
type Reply = wire.Reply

// ReqForce is wire.ReqForce.
const ReqForce = wire.ReqForce

// ReqGraceful is wire.ReqGraceful.
const ReqGraceful = wire.ReqGraceful

// Request is wire.Request.
type Request = wire.Request

// RequestNextLVer is wire.RequestNextLVer.
const RequestNextLVer = wire.RequestNextLVer

// ResAlign1M is wire.ResAlign1M.
const ResAlign1M = wire.ResAlign1M

// ResAlign2M is wire.ResAlign2M.
const ResAlign2M = wire.ResAlign2M

// ResAlign4M is wire.ResAlign4M.
const ResAlign4M = wire.ResAlign4M

// ResAlign8M is wire.ResAlign8M.
const ResAlign8M = wire.ResAlign8M

// ResLVer is wire.ResLVer.
const ResLVer = wire.ResLVer

// ResNumHosts is wire.ResNumHosts.
const ResNumHosts = wire.ResNumHosts

// ResPersistent is wire.ResPersistent.
const ResPersistent = wire.ResPersistent

// ResSector4K is wire.ResSector4K.
const ResSector4K = wire.ResSector4K

// ResSector512 is wire.ResSector512.
const ResSector512 = wire.ResSector512

// ResShared is wire.ResShared.
const ResShared = wire.ResShared

// Resource is wire.Resource.
type Resource = wire.Resource

// ResourceSize is wire.ResourceSize.
const ResourceSize = wire.ResourceSize

// ResourceString is wire.ResourceString.
func ResourceString(r *Resource) string { return wire.ResourceString(r) }

// RestrictAll is wire.RestrictAll.
const RestrictAll = wire.RestrictAll

// RestrictSigkill is wire.RestrictSigkill.
const RestrictSigkill = wire.RestrictSigkill

// RestrictSigterm is wire.RestrictSigterm.
const RestrictSigterm = wire.RestrictSigterm

// SetevAllHosts is wire.SetevAllHosts.
const SetevAllHosts = wire.SetevAllHosts

// SetevClearEvent is wire.SetevClearEvent.
const SetevClearEvent = wire.SetevClearEvent

// SetevClearHostID is wire.SetevClearHostID.
const SetevClearHostID = wire.SetevClearHostID

// SetevCurGeneration is wire.SetevCurGeneration.
const SetevCurGeneration = wire.SetevCurGeneration

// SetevReplaceEvent is wire.SetevReplaceEvent.
const SetevReplaceEvent = wire.SetevReplaceEvent

// SplitUnescaped is wire.SplitUnescaped.
func SplitUnescaped(s string, n int) []string { return wire.SplitUnescaped(s, n) }

// State is wire.State.
type State = wire.State

// StateClient is wire.StateClient.
const StateClient = wire.StateClient

// StateDaemon is wire.StateDaemon.
const StateDaemon = wire.StateDaemon

// StateHost is wire.StateHost.
const StateHost = wire.StateHost

// StateLockspace is wire.StateLockspace.
const StateLockspace = wire.StateLockspace

// StateRecord is wire.StateRecord.
type StateRecord = wire.StateRecord

// StateRenewal is wire.StateRenewal.
const StateRenewal = wire.StateRenewal

// StateResource is wire.StateResource.
const StateResource = wire.StateResource

// StateSize is wire.StateSize.
const StateSize = wire.StateSize

// WriteClear is wire.WriteClear.
const WriteClear = wire.WriteClear

// Transitional re-exports of package wire for daemon/ (it will import wire
// itself after the manager split).

// CmdByDebugName is wire.CmdByDebugName.
//
// Deprecated: transitional alias, removed after the manager split.
func CmdByDebugName(name string) (Cmd, bool) { return wire.CmdByDebugName(name) }

// DefaultMaxPayload is wire.DefaultMaxPayload.
//
// Deprecated: transitional alias, removed after the manager split.
const DefaultMaxPayload = wire.DefaultMaxPayload

// Drain is wire.Drain.
//
// Deprecated: transitional alias, removed after the manager split.
func Drain(r io.Reader, q *Request, max int64) (int64, error) { return wire.Drain(r, q, max) }

// NewHeader is wire.NewHeader.
//
// Deprecated: transitional alias, removed after the manager split.
func NewHeader(cmd Cmd, cmdFlags, data, data2 uint32) Header {
	return wire.NewHeader(cmd, cmdFlags, data, data2)
}

// ReadRequest is wire.ReadRequest.
//
// Deprecated: transitional alias, removed after the manager split.
func ReadRequest(r io.Reader, maxPayload int) (*Request, error) {
	return wire.ReadRequest(r, maxPayload)
}

// ResultReply is wire.ResultReply.
//
// Deprecated: transitional alias, removed after the manager split.
func ResultReply(req Header, result int32) Header { return wire.ResultReply(req, result) }

// ShutdownWaitFinalReply is wire.ShutdownWaitFinalReply.
//
// Deprecated: transitional alias, removed after the manager split.
func ShutdownWaitFinalReply() Header { return wire.ShutdownWaitFinalReply() }

// VersionReply is wire.VersionReply.
//
// Deprecated: transitional alias, removed after the manager split.
func VersionReply(daemonVersion uint32) Header { return wire.VersionReply(daemonVersion) }
