package delta

// SetStageTouchFirst switches t's Stage first pass (benchmarks compare).
func SetStageTouchFirst(t *HostTable, on bool) { t.noTouch = !on }

// AreaWithHostA is areaWithHostA for the external tests.
var AreaWithHostA = areaWithHostA
