"""A lease-holding client process driven over stdin, for the resource
differential tests (daemon/python_resource_test.go).

usage: resources_agent.py PATH

The process registers with the daemon found through SANLOCK_RUN_DIR (read
once per process by libsanlock), prints "ready <pid>", then runs one command
per input line and prints exactly one output line per command:
"ok <normalised result>" or "err <errno>" (or "exc <type>" for a python
exception other than SanlockException). PATH is printed as the word PATH and
timestamps as T, so that runs against different daemons compare.

Calls that python3-sanlock exposes go through the binding. Flags it does not
expose (ORPHAN, PERSISTENT, OWNER_NOWAIT, REL_ORPHAN, REL_ALL, convert,
examine) go through libsanlock.so.1 with ctypes.

Commands (RES is "LS:NAME:OFFSET"; the path is always PATH unless the
command says otherwise):
  acquire RES [shared] [lvb] [version=N] [pid=N] [path=P]
  release RES [pid=N]
  inquire [pid=N]
  request RES action [version=N|none]
  read_resource OFFSET
  read_owners RES
  write_resource RES [num_hosts=N] [clear]
  set_lvb RES TEXT|fill=N | get_lvb RES SIZE
  killpath PROG ARG...
  cacquire RES cmdflags resflags [lver=N] [pid=N]   (libsanlock)
  crelease RES cmdflags [pid=N]                      (libsanlock; RES "-" = none)
  cconvert RES cmdflags resflags [pid=N]             (libsanlock)
  cexamine RES                                       (libsanlock)
  pid | exit
"""
import ctypes
import os
import sys

import sanlock

PATH = sys.argv[1]
FD = None


class Disk(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char * 1024), ("offset", ctypes.c_uint64),
                ("pad1", ctypes.c_uint32), ("pad2", ctypes.c_uint32)]


def resource_type(ndisks):
    class Res(ctypes.Structure):
        _fields_ = [("lockspace_name", ctypes.c_char * 48), ("name", ctypes.c_char * 48),
                    ("lver", ctypes.c_uint64), ("data64", ctypes.c_uint64),
                    ("data32", ctypes.c_uint32), ("unused", ctypes.c_uint32),
                    ("flags", ctypes.c_uint32), ("num_disks", ctypes.c_uint32),
                    ("disks", Disk * ndisks)]
    return Res


LIB = ctypes.CDLL("libsanlock.so.1")


def cres(spec, flags=0, lver=0, path=None):
    ls, name, off = split(spec)
    r = resource_type(1)()
    r.lockspace_name, r.name = ls, name
    r.flags, r.lver, r.num_disks = flags, lver, 1
    r.disks[0].path = (path or PATH).encode()
    r.disks[0].offset = off
    return r


def check(rv):
    """libsanlock results are printed raw: "err -17", "err -247"."""
    if rv < 0:
        raise sanlock.SanlockException(rv, "libsanlock", "")
    return rv


def offset(s):
    """A byte offset, or a number of MiB with an M suffix."""
    if s.endswith("M"):
        return int(s[:-1]) << 20
    return int(s)


def split(spec):
    ls, name, off = spec.split(":")
    return ls.encode(), name.encode(), offset(off)


def kw(args):
    flags, opts = set(), {}
    for a in args:
        if "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        else:
            flags.add(a)
    return flags, opts


def norm(v):
    if isinstance(v, list):
        return "[" + ", ".join(norm(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(norm(x) for x in v) + ")"
    if isinstance(v, dict):
        parts = []
        for k in sorted(v):
            x = v[k]
            if k == "timestamp":
                x = "T" if x else 0
            parts.append("%s=%s" % (k, norm(x)))
        return "{" + " ".join(parts) + "}"
    if isinstance(v, bytes):
        v = v.rstrip(b"\0").decode(errors="replace")
    if isinstance(v, str):
        return v.replace(PATH, "PATH")
    return str(v)


def target(opts):
    if "pid" in opts:
        return {"pid": int(opts["pid"])}
    return {"slkfd": FD}


def run(op, args):
    flags, opts = kw(args[1:]) if args else (set(), {})
    if op == "acquire":
        ls, name, off = split(args[0])
        k = target(opts)
        if "version" in opts:
            k["version"] = int(opts["version"])
        return sanlock.acquire(ls, name, [(opts.get("path", PATH), off)], shared="shared" in flags,
                               lvb="lvb" in flags, **k)
    if op == "release":
        ls, name, off = split(args[0])
        return sanlock.release(ls, name, [(PATH, off)], **target(opts))
    if op == "inquire":
        flags, opts = kw(args)
        return sanlock.inquire(**target(opts))
    if op == "request":
        ls, name, off = split(args[0])
        action = {"graceful": sanlock.REQ_GRACEFUL, "force": sanlock.REQ_FORCE, "none": 0}[args[1]]
        flags, opts = kw(args[2:])
        v = opts.get("version", "none")
        return sanlock.request(ls, name, [(PATH, off)], action=action,
                               version=None if v == "none" else int(v))
    if op == "read_resource":
        return sanlock.read_resource(PATH, offset(args[0]))
    if op == "read_owners":
        ls, name, off = split(args[0])
        return sanlock.read_resource_owners(ls, name, [(PATH, off)])
    if op == "write_resource":
        ls, name, off = split(args[0])
        return sanlock.write_resource(ls, name, [(PATH, off)], num_hosts=int(opts.get("num_hosts", 0)),
                                      clear="clear" in flags)
    if op == "set_lvb":
        ls, name, off = split(args[0])
        data = args[1].encode()
        if args[1].startswith("fill="):
            data = b"x" * int(args[1][5:])
        return sanlock.set_lvb(ls, name, [(PATH, off)], data)
    if op == "get_lvb":
        ls, name, off = split(args[0])
        return sanlock.get_lvb(ls, name, [(PATH, off)], int(args[1]))
    if op == "killpath":
        return sanlock.killpath(args[0].encode(), [a.encode() for a in args[1:]], slkfd=FD)
    if op == "cacquire":
        r = cres(args[0], flags=int(args[2], 0), lver=int(opts.get("lver", "0")))
        arr = (ctypes.c_void_p * 1)(ctypes.addressof(r))
        return check(LIB.sanlock_acquire(FD if "pid" not in opts else -1, int(opts.get("pid", "-1")),
                                         ctypes.c_uint32(int(args[1], 0)), 1, arr, None))
    if op == "crelease":
        n = 0
        arr = (ctypes.c_void_p * 1)()
        if args[0] != "-":
            r = cres(args[0])
            arr[0] = ctypes.addressof(r)
            n = 1
        return check(LIB.sanlock_release(FD if "pid" not in opts else -1, int(opts.get("pid", "-1")),
                                         ctypes.c_uint32(int(args[1], 0)), n, arr))
    if op == "cconvert":
        r = cres(args[0], flags=int(args[2], 0))
        return check(LIB.sanlock_convert(FD if "pid" not in opts else -1, int(opts.get("pid", "-1")),
                                         ctypes.c_uint32(int(args[1], 0)), ctypes.byref(r)))
    if op == "cexamine":
        r = cres(args[0])
        return check(LIB.sanlock_examine(ctypes.c_uint32(0), None, ctypes.byref(r)))
    if op == "pid":
        return os.getpid()
    raise SystemExit("unknown op " + op)


def main():
    global FD
    FD = sanlock.register()
    print("ready", os.getpid(), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "exit":
            break
        try:
            out = "ok " + norm(run(words[0], words[1:]))
        except sanlock.SanlockException as e:
            out = "err %d" % e.errno
        except Exception as e:  # noqa: BLE001 - reported, compared
            out = "exc %s" % type(e).__name__
        print(out, flush=True)


if __name__ == "__main__":
    main()
