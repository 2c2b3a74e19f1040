package promtext

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The Go runtime's figures under the names, types and help texts the
// Prometheus client's Go collector gave them (go_goroutines, go_threads,
// go_memstats_*, ...), so dashboards and the fault battery
// (docs/reliability.md reads go_goroutines) keep working. The memstats
// figures are derived from runtime/metrics, which does not stop the world.

// The runtime/metrics names read at each scrape.
const (
	rmTinyAllocs    = "/gc/heap/tiny/allocs:objects"
	rmAllocsObjects = "/gc/heap/allocs:objects"
	rmFreesObjects  = "/gc/heap/frees:objects"
	rmAllocsBytes   = "/gc/heap/allocs:bytes"
	rmHeapObjects   = "/gc/heap/objects:objects"
	rmHeapGoal      = "/gc/heap/goal:bytes"
	rmTotal         = "/memory/classes/total:bytes"
	rmHeapObjBytes  = "/memory/classes/heap/objects:bytes"
	rmHeapUnused    = "/memory/classes/heap/unused:bytes"
	rmHeapReleased  = "/memory/classes/heap/released:bytes"
	rmHeapFree      = "/memory/classes/heap/free:bytes"
	rmHeapStacks    = "/memory/classes/heap/stacks:bytes"
	rmOSStacks      = "/memory/classes/os-stacks:bytes"
	rmMSpanInuse    = "/memory/classes/metadata/mspan/inuse:bytes"
	rmMSpanFree     = "/memory/classes/metadata/mspan/free:bytes"
	rmMCacheInuse   = "/memory/classes/metadata/mcache/inuse:bytes"
	rmMCacheFree    = "/memory/classes/metadata/mcache/free:bytes"
	rmProfBuckets   = "/memory/classes/profiling/buckets:bytes"
	rmMetadataOther = "/memory/classes/metadata/other:bytes"
	rmOther         = "/memory/classes/other:bytes"
	rmGOGC          = "/gc/gogc:percent"
	rmGOMEMLIMIT    = "/gc/gomemlimit:bytes"
	rmGOMAXPROCS    = "/sched/gomaxprocs:threads"
)

var rmNames = [...]string{rmTinyAllocs, rmAllocsObjects, rmFreesObjects, rmAllocsBytes, rmHeapObjects,
	rmHeapGoal, rmTotal, rmHeapObjBytes, rmHeapUnused, rmHeapReleased, rmHeapFree, rmHeapStacks,
	rmOSStacks, rmMSpanInuse, rmMSpanFree, rmMCacheInuse, rmMCacheFree, rmProfBuckets, rmMetadataOther,
	rmOther, rmGOGC, rmGOMEMLIMIT, rmGOMAXPROCS}

// goFigure is one unlabelled gauge or counter of the Go runtime.
type goFigure struct {
	name, typ, help string
	value           func(v func(string) float64) float64
}

func rm(name string) func(func(string) float64) float64 {
	return func(v func(string) float64) float64 { return v(name) }
}

func rmSum(names ...string) func(func(string) float64) float64 {
	return func(v func(string) float64) float64 {
		var t float64
		for _, n := range names {
			t += v(n)
		}
		return t
	}
}

var goFigures = []goFigure{
	{"go_gc_gogc_percent", Gauge, "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", rm(rmGOGC)},
	{"go_gc_gomemlimit_bytes", Gauge, "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", rm(rmGOMEMLIMIT)},
	{"go_memstats_alloc_bytes", Gauge, "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", rm(rmHeapObjBytes)},
	{"go_memstats_alloc_bytes_total", Counter, "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", rm(rmAllocsBytes)},
	{"go_memstats_buck_hash_sys_bytes", Gauge, "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", rm(rmProfBuckets)},
	{"go_memstats_frees_total", Counter, "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", rmSum(rmFreesObjects, rmTinyAllocs)},
	{"go_memstats_gc_sys_bytes", Gauge, "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", rm(rmMetadataOther)},
	{"go_memstats_heap_alloc_bytes", Gauge, "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", rm(rmHeapObjBytes)},
	{"go_memstats_heap_idle_bytes", Gauge, "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", rmSum(rmHeapReleased, rmHeapFree)},
	{"go_memstats_heap_inuse_bytes", Gauge, "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", rmSum(rmHeapObjBytes, rmHeapUnused)},
	{"go_memstats_heap_objects", Gauge, "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", rm(rmHeapObjects)},
	{"go_memstats_heap_released_bytes", Gauge, "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", rm(rmHeapReleased)},
	{"go_memstats_heap_sys_bytes", Gauge, "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", rmSum(rmHeapObjBytes, rmHeapUnused, rmHeapReleased, rmHeapFree)},
	{"go_memstats_mallocs_total", Counter, "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", rmSum(rmAllocsObjects, rmTinyAllocs)},
	{"go_memstats_mcache_inuse_bytes", Gauge, "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", rm(rmMCacheInuse)},
	{"go_memstats_mcache_sys_bytes", Gauge, "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", rmSum(rmMCacheInuse, rmMCacheFree)},
	{"go_memstats_mspan_inuse_bytes", Gauge, "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", rm(rmMSpanInuse)},
	{"go_memstats_mspan_sys_bytes", Gauge, "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", rmSum(rmMSpanInuse, rmMSpanFree)},
	{"go_memstats_next_gc_bytes", Gauge, "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", rm(rmHeapGoal)},
	{"go_memstats_other_sys_bytes", Gauge, "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", rm(rmOther)},
	{"go_memstats_stack_inuse_bytes", Gauge, "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", rm(rmHeapStacks)},
	{"go_memstats_stack_sys_bytes", Gauge, "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", rmSum(rmHeapStacks, rmOSStacks)},
	{"go_memstats_sys_bytes", Gauge, "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", rm(rmTotal)},
	{"go_sched_gomaxprocs_threads", Gauge, "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", rm(rmGOMAXPROCS)},
}

// rmMu guards rmSamples: one scrape reads the runtime at a time.
var (
	rmMu      sync.Mutex
	rmSamples []metrics.Sample
)

// GoRuntime returns the Go runtime's families: goroutines, threads, GC
// pauses, go_info and the memstats figures.
func GoRuntime() []Family {
	rmMu.Lock()
	if rmSamples == nil {
		rmSamples = make([]metrics.Sample, len(rmNames))
		for i, n := range rmNames {
			rmSamples[i].Name = n
		}
	}
	metrics.Read(rmSamples)
	vals := make(map[string]float64, len(rmSamples))
	for _, s := range rmSamples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			vals[s.Name] = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			vals[s.Name] = s.Value.Float64()
		}
	}
	rmMu.Unlock()
	get := func(n string) float64 { return vals[n] }

	threads, _ := runtime.ThreadCreateProfile(nil)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	qs := make([]Quantile, len(gc.PauseQuantiles))
	for i, d := range gc.PauseQuantiles {
		qs[i] = Quantile{Q: float64(i) / float64(len(gc.PauseQuantiles)-1), Value: d.Seconds()}
	}

	fams := make([]Family, 0, len(goFigures)+5)
	fams = append(fams,
		Gauge1("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		Gauge1("go_threads", "Number of OS threads created.", float64(threads)),
		Family{Name: "go_gc_duration_seconds", Type: Summary,
			Help:   "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
			Series: []Series{{Quantiles: qs, Count: uint64(gc.NumGC), Sum: gc.PauseTotal.Seconds()}}},
		Gauge1("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.",
			float64(gc.LastGC.UnixNano())/1e9),
		Gauge1("go_info", "Information about the Go environment.", 1, Label{"version", runtime.Version()}),
	)
	for _, g := range goFigures {
		fams = append(fams, Family{Name: g.name, Help: g.help, Type: g.typ, Series: []Series{{Value: g.value(get)}}})
	}
	return fams
}
