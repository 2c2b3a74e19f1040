package interop

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMisalignedAcquire: `client command` (acquire) at a lease offset that
// is not a multiple of the sector size answers -EINVAL (-22) on sanlock
// 3.8.5 and on ours; a
// sector-aligned offset that is no lease answers -223 on both.
func TestMisalignedAcquire(t *testing.T) {
	t.Parallel()
	needRealSanlock(t)
	sides := []*rtSide{rtRealSide(t, "sanlock 3.8.5"), rtOurSide(t)}
	rtPrepare(t, false, sides...)
	rtParallel(sides, func(s *rtSide) {
		for _, off := range []string{"1000", "1048577", "1049088"} {
			s.cli("client", "command", "-r", "LS:R1:PATH:"+off, "-c", "/bin/true")
		}
	})
	rtShutdown(sides)
	rtCompare(t, sides)
	out := strings.Join(sides[0].out, "\n")
	assert.Equal(t, 2, strings.Count(out, "acquire done -22\n"), out)
	assert.Equal(t, 1, strings.Count(out, "acquire done -223"), out)
}
