package manager

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKillpathArgv checks the kill program argument splitting.
func TestKillpathArgv(t *testing.T) {
	assert.Equal(t, []string{"/bin/kp", "a b", `c\`, "d"}, killpathArgv("/bin/kp", `a\ b c\\ d`, 0))
	assert.Equal(t, []string{"/bin/kp", "x", "42"}, killpathArgv("/bin/kp", " x ", 42))
	long := strings.Repeat("a ", 20)
	assert.Len(t, killpathArgv("/p", long, 7), maxKillArgv)
	assert.Len(t, killpathArgv("/p", long, 0), maxKillArgv)
	_, err := exec.LookPath("true")
	require.NoError(t, err)
}
