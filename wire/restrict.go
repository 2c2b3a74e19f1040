package wire

import "syscall"

// RESTRICT flags of a registered client (docs/protocol.md "Flags"): the only
// definition of the restrict rules; the daemon's escalation and paxos's
// examine decision both apply them through RestrictSignal.
const (
	RestrictAll     = 0x1 // SANLK_RESTRICT_ALL: no more commands on this connection
	RestrictSigkill = 0x2 // SANLK_RESTRICT_SIGKILL: send SIGTERM where SIGKILL was due
	RestrictSigterm = 0x4 // SANLK_RESTRICT_SIGTERM: send SIGKILL where SIGTERM was due
)

// RestrictSignal is the signal a client with the given restrict flags gets
// when sig is due. The two substitutions apply in order, as sanlock
// applies them: RestrictSigkill turns SIGKILL into SIGTERM, then
// RestrictSigterm turns SIGTERM into SIGKILL; so with both flags every
// kill is a SIGKILL. Any other signal is sent as it is.
func RestrictSignal(restrict uint32, sig syscall.Signal) syscall.Signal {
	if sig == syscall.SIGKILL && restrict&RestrictSigkill != 0 {
		sig = syscall.SIGTERM
	}
	if sig == syscall.SIGTERM && restrict&RestrictSigterm != 0 {
		sig = syscall.SIGKILL
	}
	return sig
}
