package manager

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

func TestLogTextHelpers(t *testing.T) {
	assert.Equal(t, "-210 (SANLK_DBLOCK_READ)", codeLog(-210))
	assert.Equal(t, "-2 (ENOENT)", codeLog(-2))
	assert.Equal(t, "-999", codeLog(-999))
	assert.Equal(t, "/dev/sdb:1048576", diskLog("/dev/sdb", 1<<20))
	assert.Equal(t, "/a:0,/b:512", disksLog([]wire.Disk{{Path: "/a"}, {Path: "/b", Offset: 512}}))
	assert.Equal(t, "no error", causeLog(nil, 10))
	assert.Equal(t, "I/O timeout after 10 s: read: disk I/O timed out",
		causeLog(fmt.Errorf("read: %w", rescode.ErrIOTimeout), 10))
	assert.Equal(t, "open /x: no such file or directory",
		causeLog(&os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, 0))
}
