package manager

import (
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Helpers that give error log lines what a person needs to act on them:
// the result code with its name, the disk and offset,
// and the cause as text. 3.8.5's line stays first, the detail follows.

// codeLog formats a result code as "-210 (SANLK_DBLOCK_READ)".
func codeLog(c rescode.Code) string { return c.LogString() }

// errLog formats the result code of err as codeLog does.
func errLog(err error) string { return rescode.CodeOf(err).LogString() }

// diskLog formats one disk as "path:offset".
func diskLog(path string, off uint64) string { return fmt.Sprintf("%s:%d", path, off) }

// disksLog formats a resource's disks as "path:offset[,path:offset...]".
func disksLog(ds []wire.Disk) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = diskLog(d.Path, d.Offset)
	}
	return strings.Join(parts, ",")
}

// causeLog is diskfmt.Cause: the error as text, never "<nil>". A paxos
// error prints only its result code when its detail wraps that code; the
// detail (which disk read failed, and the errno) is put back here.
func causeLog(err error, ioTimeout int) string {
	var pe *paxos.Error
	if !errors.As(err, &pe) || pe.Err == nil {
		return diskfmt.Cause(err, ioTimeout)
	}
	text := err.Error()
	detail := pe.Err.Error()
	switch {
	case strings.Contains(text, detail):
	case pe.Leader == nil && text == (&paxos.Error{Op: pe.Op, Code: pe.Code}).Error():
		text = "paxos " + pe.Op + ": " + detail
	default:
		text += ": " + detail
	}
	return timeoutPrefix(err, ioTimeout) + text
}

// timeoutPrefix is "I/O timeout after N s: " when err is a timeout and
// ioTimeout is known.
func timeoutPrefix(err error, ioTimeout int) string {
	if ioTimeout > 0 && rescode.CodeOf(err) == rescode.ErrAIOTimeout {
		return fmt.Sprintf("I/O timeout after %d s: ", ioTimeout)
	}
	return ""
}

// hostIOTimeout is h's io_timeout in seconds, 0 when h is nil.
func hostIOTimeout(h *paxos.Host) int {
	if h == nil {
		return 0
	}
	return h.IOTimeout
}

// CodeLog formats a result code as "-210 (SANLK_DBLOCK_READ)".
func CodeLog(c rescode.Code) string { return codeLog(c) }

// CauseLog is the cause of err as log text (see causeLog).
func CauseLog(err error, ioTimeout int) string { return causeLog(err, ioTimeout) }

// DiskLog formats one disk as "path:offset".
func DiskLog(path string, off uint64) string { return diskLog(path, off) }

// Log fields shared by the manager's lines (docs/cli.md "Logging"): the
// message keeps sanlock's wording, these follow it as key=value.

// resultField is the result code of err, "-2 (ENOENT)".
func resultField(err error) zap.Field { return zap.String("result", errLog(err)) }

// causeField is err as text (causeLog).
func causeField(err error, ioTimeout int) zap.Field {
	return zap.String("cause", causeLog(err, ioTimeout))
}

// diskField is one disk as "path:offset".
func diskField(path string, off uint64) zap.Field { return zap.String("disk", diskLog(path, off)) }

// disksField is a resource's disks as "path:offset[,path:offset...]".
func disksField(ds []wire.Disk) zap.Field { return zap.String("disk", disksLog(ds)) }

// spaceField and resField name a lockspace and a resource.
func spaceField(name string) zap.Field { return zap.String("lockspace", name) }
func resField(name string) zap.Field   { return zap.String("resource", name) }
