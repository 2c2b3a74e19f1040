package diskfmt

import (
	"fmt"
	"strconv"
)

// LogString formats c for a log line: the number, then the name from the
// code table or the errno name, e.g. "-210 (SANLK_DBLOCK_READ)", "-5 (EIO)";
// just the number when the code has no name.
func (c Code) LogString() string {
	if n := c.Name(); n != "" {
		return fmt.Sprintf("%d (%s)", int(c), n)
	}
	return strconv.Itoa(int(c))
}

// Cause is the text of err for the end of a log line: the whole chain,
// which names the result code when there is one; a timeout is prefixed
// "I/O timeout after N s" when ioTimeout (seconds) is known. nil gives "no
// error", so a log line never shows Go's "<nil>".
func Cause(err error, ioTimeout int) string {
	if err == nil {
		return "no error"
	}
	if ioTimeout > 0 && CodeOf(err) == ErrAIOTimeout {
		return fmt.Sprintf("I/O timeout after %d s: %s", ioTimeout, err.Error())
	}
	return err.Error()
}
