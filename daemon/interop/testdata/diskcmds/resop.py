"""python3-sanlock resource-area calls that need no lockspace, against the
daemon of SANLOCK_RUN_DIR (read once per process by libsanlock).

usage: resop.py PHASE PATH

Prints one line per call: "<label>: ok <result>" or "<label>: err <errno>",
with PATH in place of the lease file, so that the output of our daemon and
of sanlock 3.8.5 can be compared line by line.
"""
import sys

import sanlock

M = 1 << 20


def norm(v, path):
    if isinstance(v, list):
        return "[" + ", ".join(norm(x, path) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + " ".join("%s=%s" % (k, norm(v[k], path)) for k in sorted(v)) + "}"
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        return v.replace(path, "PATH")
    return str(v)


def call(label, path, f, *args, **kw):
    try:
        r = f(*args, **kw)
        print("%s: ok %s" % (label, norm(r, path)))
    except sanlock.SanlockException as e:
        print("%s: err %d" % (label, e.errno))
    except ValueError as e:
        print("%s: ValueError %s" % (label, e))
    sys.stdout.flush()


def main():
    phase, path = sys.argv[1], sys.argv[2]
    p = path.encode()
    owners, rread, write = sanlock.read_resource_owners, sanlock.read_resource, sanlock.write_resource
    if phase == "write":
        call("write R1", path, write, b"LS", b"R1", [(p, M)])
        call("read R1", path, rread, p, M)
        call("owners R1", path, owners, b"LS", b"R1", [(p, M)])
        call("write R2 max 3 num 5", path, write, b"LS", b"R2", [(p, 2 * M)], max_hosts=3, num_hosts=5)
        call("read R2", path, rread, p, 2 * M)
        call("write R3 clear", path, write, b"LS", b"R3", [(p, 3 * M)], clear=True)
        call("read R3", path, rread, p, 3 * M)
        call("owners R3", path, owners, b"LS", b"R3", [(p, 3 * M)])
        call("write R4 4096/8M", path, write, b"LS", b"R4", [(p, 8 * M)], align=8 * M, sector=4096)
        call("read R4 default sizes", path, rread, p, 8 * M)
        call("read R4 4096/8M", path, rread, p, 8 * M, align=8 * M, sector=4096)
        call("owners R4 default sizes", path, owners, b"LS", b"R4", [(p, 8 * M)])
        call("owners R4 4096/8M", path, owners, b"LS", b"R4", [(p, 8 * M)], align=8 * M, sector=4096)
        call("owners R4 4096/1M", path, owners, b"LS", b"R4", [(p, 8 * M)], align=M, sector=4096)
        call("write R5 512/2M", path, write, b"LS", b"R5", [(p, 5 * M)], align=2 * M)
        call("write R5 two disks", path, write, b"LS", b"R5", [(p, 5 * M), (p, 6 * M)])
        call("read R5 second disk", path, rread, p, 6 * M)
        call("owners R5 two disks", path, owners, b"LS", b"R5", [(p, 5 * M), (p, 6 * M)])
        call("read no lease", path, rread, p, 7 * M)
        call("owners no lease", path, owners, b"LS", b"R7", [(p, 7 * M)])
        call("read missing file", path, rread, b"/nonexistent/leases", M)
        call("write missing file", path, write, b"LS", b"RX", [(b"/nonexistent/leases", M)])
        call("owners wrong lockspace", path, owners, b"LX", b"R1", [(p, M)])
        call("owners wrong name", path, owners, b"LS", b"RX", [(p, M)])
        call("write name of 48", path, write, b"L" * 48, b"N" * 48, [(p, 7 * M)])
        call("read name of 48", path, rread, p, 7 * M)
        call("owners name of 48", path, owners, b"L" * 48, b"N" * 48, [(p, 7 * M)])
    elif phase == "owners":
        call("owners R1 crafted", path, owners, b"LS", b"R1", [(p, M)])
        call("read R1 crafted", path, rread, p, M)
        call("owners R2 crafted", path, owners, b"LS", b"R2", [(p, 2 * M)])
        call("read R2 crafted", path, rread, p, 2 * M)
    else:
        sys.exit("unknown phase " + phase)


main()
