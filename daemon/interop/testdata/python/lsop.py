"""One python3-sanlock lockspace call per process (libsanlock reads
SANLOCK_RUN_DIR once per process).

usage: lsop.py OP LOCKSPACE PATH [ARGS...]

Prints one line: "ok <normalised result>" or "err <errno>". Timestamps are
replaced by T and PATH by the word PATH, so that the output of our daemon
and of sanlock 3.8.5 can be compared.
"""
import sys

import sanlock


def norm(v, path):
    if isinstance(v, list):
        return "[" + ", ".join(norm(x, path) for x in v) + "]"
    if isinstance(v, dict):
        parts = []
        for k in sorted(v):
            x = v[k]
            if k == "timestamp":
                x = "T" if x else 0
            parts.append("%s=%s" % (k, norm(x, path)))
        return "{" + " ".join(parts) + "}"
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v == path:
        return "PATH"
    return str(v)


def main():
    op, ls, path = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
    args = [int(a) for a in sys.argv[4:]]
    p = path.encode()
    if op == "write":
        r = sanlock.write_lockspace(ls, p, iotimeout=args[0])
    elif op == "read":
        r = sanlock.read_lockspace(p)
    elif op == "add":
        r = sanlock.add_lockspace(ls, args[0], p, iotimeout=args[1])
    elif op == "add_async":
        r = sanlock.add_lockspace(ls, args[0], p, iotimeout=args[1], wait=False)
    elif op == "inq":
        r = sanlock.inq_lockspace(ls, args[0], p)
    elif op == "inq_wait":
        r = sanlock.inq_lockspace(ls, args[0], p, wait=True)
    elif op == "rem":
        r = sanlock.rem_lockspace(ls, args[0], p)
    elif op == "rem_async":
        r = sanlock.rem_lockspace(ls, args[0], p, wait=False)
    elif op == "rem_unused":
        r = sanlock.rem_lockspace(ls, args[0], p, unused=True)
    elif op == "get_lockspaces":
        r = sanlock.get_lockspaces()
    elif op == "get_hosts":
        r = sanlock.get_hosts(ls, args[0] if args else 0)
    elif op == "set_event":
        r = sanlock.set_event(ls, args[0], args[1], args[2], data=args[3], flags=args[4])
    else:
        raise SystemExit("unknown op " + op)
    return r


if __name__ == "__main__":
    path = sys.argv[3]
    try:
        print("ok", norm(main(), path))
    except sanlock.SanlockException as e:
        print("err", e.errno)
