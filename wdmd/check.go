package wdmd

// Timing constants of wdmd 3.8.5 (docs/wdmd.md "Test loop").
const (
	DefaultTestInterval  = 10 // seconds between tests while all pass
	RecoveryTestInterval = 1  // seconds between tests after a failure
	DefaultFireTimeout   = 60 // seconds the device is set to
	WarnMargin           = 10 // a client warns this long before its expiry
)

// Expiry is what one client slot contributes to a test.
type Expiry struct {
	Slot    int
	Pid     int
	Name    string
	Renewal uint64
	Expire  uint64 // 0: no expiry, never fails
}

// Verdict says how one expiry fared in a test.
type Verdict int

const (
	Pass    Verdict = iota
	Warning         // now >= expire - margin: fails the test already
	Failed          // now >= expire
)

func (v Verdict) String() string {
	switch v {
	case Warning:
		return "warning"
	case Failed:
		return "failed"
	}
	return "pass"
}

// Judge is the pure test of one expiry at now: expiry 0 always passes,
// now >= expire fails, now >= expire - margin warns. Warnings count as
// failures of the test: they close the device so that its last ping
// happens before the expiry.
func Judge(now, expire, margin uint64) Verdict {
	switch {
	case expire == 0:
		return Pass
	case now >= expire:
		return Failed
	case now+margin >= expire:
		return Warning
	}
	return Pass
}

// Failure is one failing expiry of a test.
type Failure struct {
	Expiry
	Verdict Verdict
}

// Evaluate is the decision of one test, a pure function of the client
// expiries, the number of failing scripts and the time: it returns the
// failing expiries (in slot order) and whether the device may be pinged,
// which is when nothing failed.
func Evaluate(now uint64, expiries []Expiry, scriptFailures int, margin uint64) (fails []Failure, ping bool) {
	for _, e := range expiries {
		if v := Judge(now, e.Expire, margin); v != Pass {
			fails = append(fails, Failure{Expiry: e, Verdict: v})
		}
	}
	return fails, len(fails) == 0 && scriptFailures == 0
}
