// Package diskio is the I/O engine under the lease format of package
// diskfmt: File, a diskfmt.Device over a regular file or block device
// opened with O_DIRECT|O_SYNC, and what it needs to be fast and to survive a
// hung disk (docs/iopath.md).
//
//   - file.go: File, its per-device bounds (requests in flight, stuck
//     requests), the synchronous fallback, WithIOTimeout and the generic
//     ReadBuf over any Device.
//   - aio.go: the process-wide Linux native AIO context, its reaper and the
//     submitter's fast path; Background marks renewal I/O.
//   - pool.go: Buf, the pool of aligned buffers and its trimming, and the
//     turns of background reads of the large classes.
//   - hugebuf.go: huge-page regions behind the large buffer classes.
//
// Native AIO is off for the whole process when GOSANLOCK_SYNC_IO=1 is in
// the environment at the engine's first use (OpenFile, AIOStatus);
// OpenFileSync selects the synchronous fallback for one device.
package diskio
