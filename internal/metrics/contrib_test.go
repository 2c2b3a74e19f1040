package metrics

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// TestRulesPromtool checks contrib/monitoring/sanlock.rules.yml with
// promtool (Debian package prometheus): its syntax and expressions, and
// its unit tests (sanlock.rules.test.yml: which alerts fire when).
func TestRulesPromtool(t *testing.T) {
	promtool := testenv.NeedBinary(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "sanlock.rules.yml"}, {"test", "rules", "sanlock.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../contrib/monitoring"
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "promtool %v:\n%s", args, out)
	}
}
