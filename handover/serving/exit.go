package serving

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
)

// WriteFormatEnv names the environment variable that makes the serving
// image write an older handover format, as the previous release did
// (docs/upgrade.md "Upgrading from the previous release"; for tests).
const WriteFormatEnv = "GOSANLOCK_HANDOVER_WRITE_FORMAT"

// WriteFormat is the format WriteFormatEnv asks for (0: unset, the
// current one). A value out of MinFormatVersion..FormatVersion is an
// error at stage start: the reexec fails and the daemon serves on.
func WriteFormat(path string) (uint32, error) {
	v := os.Getenv(WriteFormatEnv)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n < uint64(handover.MinFormatVersion) || n > uint64(handover.FormatVersion) {
		return 0, &handover.Error{Path: path, Stage: handover.StageStart, Err: fmt.Errorf("%s=%q: not a format in %d..%d",
			WriteFormatEnv, v, handover.MinFormatVersion, handover.FormatVersion)}
	}
	return uint32(n), nil
}

// ExitAfterHandover ends the old image once the new one serves: it tells
// systemd the new main pid, then exits without any cleanup (no lease
// release, no wdmd deactivation, no unlink, no shutdown of a connection).
func ExitAfterHandover(res *handover.Result) {
	if sdnotify.Active() {
		_ = sdnotify.FromEnv(false).Send(fmt.Sprintf("MAINPID=%d", res.Pid))
	}
	os.Exit(0)
}
