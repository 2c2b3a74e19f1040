package diskfmt

import (
	"fmt"

	"github.com/gosanlock/gosanlock/rescode"
)

// Cause is the text of err for the end of a log line: the whole chain,
// which names the result code when there is one; a timeout is prefixed
// "I/O timeout after N s" when ioTimeout (seconds) is known. nil gives "no
// error", so a log line never shows Go's "<nil>".
func Cause(err error, ioTimeout int) string {
	if err == nil {
		return "no error"
	}
	if ioTimeout > 0 && rescode.CodeOf(err) == rescode.ErrAIOTimeout {
		return fmt.Sprintf("I/O timeout after %d s: %s", ioTimeout, err.Error())
	}
	return err.Error()
}
