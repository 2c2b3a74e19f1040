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
// when sig is due: RestrictSigkill turns SIGKILL into SIGTERM,
// RestrictSigterm turns SIGTERM into SIGKILL, and any other signal is sent
// as it is.
func RestrictSignal(restrict uint32, sig syscall.Signal) syscall.Signal {
	switch {
	case sig == syscall.SIGKILL && restrict&RestrictSigkill != 0:
		return syscall.SIGTERM
	case sig == syscall.SIGTERM && restrict&RestrictSigterm != 0:
		return syscall.SIGKILL
	}
	return sig
}
