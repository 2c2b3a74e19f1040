// Package diskfmt is the on-disk format of sanlock 3.8.5 leases, byte for
// byte (docs/ondisk.md), the Device interface it is read and written
// through, and the helpers that read, check and write whole records over a
// Device. It does no I/O of its own: package diskio has the device over real
// disks, package testdisk the ones of the tests.
//
// All integers are little-endian. Every structure is encoded and decoded
// field by field at fixed offsets; nothing depends on Go memory layout.
// Writes cover whole sectors: a structure smaller than its sector is written
// with the rest of the sector zeroed.
//
// # Areas
//
// Each lockspace, resource lease and resource index occupies one align-size
// area (1, 2, 4 or 8 MiB) at a caller-chosen offset. Valid (sector, align)
// pairs and the host_ids they allow:
//
//	sector  align  sectors/area  max_hosts
//	   512   1M        2048        2000
//	  4096   1M         256         250
//	  4096   2M         512         500
//	  4096   4M        1024        1000
//	  4096   8M        2048        2000
//
// # Leader record (200 bytes at the start of a delta or paxos lease sector)
//
//	 0          4          8          12         16
//	+----------+----------+----------+----------+---------------------+
//	| magic    | version  | flags    | sect_sz  | num_hosts (u64)     |
//	+----------+----------+----------+----------+---------------------+
//	24 max_hosts   32 owner_id   40 owner_generation   48 lver   (u64 each)
//	56  space_name    [48]byte
//	104 resource_name [48]byte   (delta: the owner's host name)
//	152 timestamp u64   160 unused1 u64 (5.x DEAD_EXT: marker host_id<<16 | gen)
//	168 checksum u32    172 unused u16   174 io_timeout u16
//	176 write_id u64    184 write_generation u64   192 write_timestamp u64
//
// The checksum covers bytes [0,168); io_timeout and the write_* fields are
// outside it. Versions are major<<16|minor; delta majors 3, 4, 5 and paxos
// majors 6, 7 share this layout (docs/ondisk.md "Format versions"). In a
// delta lease write_id/write_generation/write_timestamp carry the host
// event (generation, event, data).
//
// # Checksum
//
// CRC-32C (reflected polynomial 0x82F63B78), initial register 0xFFFFFFFE and
// no final xor, over the stored little-endian bytes. Leaders: [0,168) stored
// at 168. Dblocks: [0,48) stored at 48.
//
// # Delta lease area (lockspace)
//
//	sector 0 .. max_hosts-1: host_id N at sector N-1
//	  [0,200)   leader (magic 0x12212010, version 0x00030004; 5.x: 0x00040000, 0x00050000)
//	  [256,512) host bitmap: host h is bit (h-1)%8 of byte (h-1)/8
//	sectors max_hosts .. end: zero
//
// # Paxos lease area (resource)
//
//	sector 0       leader (magic 0x06152010; 0x11282016 when cleared;
//	               version 0x00060004; 5.x: 0x00070000)
//	sector 1       request record: magic u32, version u32, lver u64,
//	               force_mode u32, 4 padding bytes (ignored)
//	sector 1+h     host h: dblock at 0, mode block at 128
//	                 dblock: mbal bal inp inp2 inp3 lver (u64 each),
//	                         checksum u32 (over [0,48)), flags u32
//	                 mode block: flags u32, pad u32, generation u64
//	sector 2002    lock value block (for every geometry, even outside
//	               the area)
//
// # Resource index
//
//	rx_offset           header: magic version flags sector_size
//	                    max_resources unused (u32), rx_offset u64,
//	                    lockspace_name [48]
//	  + sector_size     entries of 64 bytes: res_offset u64, flags u32,
//	                    unused u32, name [48]
//	rx_offset + align   the index's own paxos lease "rindex_lease"
//	rx_offset + (2+i)*align   the resource lease of entry i
//
// Decoders never fail on content alone: Decode* return what the bytes say,
// and the Verify* functions apply sanlock's checks in sanlock's order
// (magic, version, names, num_hosts, checksum), each with its own result
// Code, so tools can print what they read and callers get the same result
// values as sanlock.
package diskfmt
