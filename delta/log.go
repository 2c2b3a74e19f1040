package delta

import (
	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Logging: the delta lease and the runner log with zap, a message in
// sanlock's wording followed by structured fields (docs/cli.md "Logging").
// The caller gives the logger (Config.Log, Lease.Log) and adds what delta
// does not know, such as the disk path; nil discards the lines.

// resultField is the result code of err as log text, "-202 (SANLK_AIO_TIMEOUT)".
func resultField(err error) zap.Field {
	return zap.String("result", rescode.CodeOf(err).LogString())
}

// causeField is err as text for a log line (diskfmt.Cause), with the
// "I/O timeout after N s" prefix when ioTimeout is known.
func causeField(err error, ioTimeout int) zap.Field {
	return zap.String("cause", diskfmt.Cause(err, ioTimeout))
}

// nopOr returns l, or a logger that discards everything when l is nil.
func nopOr(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}

// ownerFields are the owner fields of a delta lease record, after hostID
// (ours) when it is not 0.
func ownerFields(hostID uint64, r *diskfmt.Leader) []zap.Field {
	f := make([]zap.Field, 0, 5)
	if hostID != 0 {
		f = append(f, zap.Uint64("host_id", hostID))
	}
	return append(f, zap.Uint64("owner_id", r.OwnerID), zap.Uint64("owner_generation", r.OwnerGeneration),
		zap.Uint64("timestamp", r.Timestamp), zap.String("owner_name", diskfmt.NameString(r.ResourceName[:])))
}
