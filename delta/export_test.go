package delta

// SetStageTouchFirst switches Stage's first pass (benchmarks).
func SetStageTouchFirst(on bool) (was bool) { was, stageTouchFirst = stageTouchFirst, on; return }
