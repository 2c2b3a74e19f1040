"""Register an event listener and print the first events that arrive.

usage: evlisten.py LOCKSPACE SECONDS

Prints "registered" (or "err <errno>") as soon as reg_event returned, then
"event <fields>" for the first get_event batch (or "timeout"), then
"end ok" after end_event.
"""
import select
import sys
import time

import sanlock


def main():
    ls, secs = sys.argv[1].encode(), float(sys.argv[2])
    try:
        fd = sanlock.reg_event(ls)
    except sanlock.SanlockException as e:
        print("err", e.errno, flush=True)
        return
    print("registered", flush=True)
    deadline = time.monotonic() + secs
    got = None
    while got is None and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        evs = sanlock.get_event(fd)
        if evs:
            got = evs[0]
    if got is None:
        print("timeout", flush=True)
    else:
        keys = ("from_host_id", "from_generation", "host_id", "generation", "event", "data")
        print("event " + " ".join("%s=%s" % (k, got[k]) for k in keys), flush=True)
    sanlock.end_event(fd, ls)
    print("end ok", flush=True)


if __name__ == "__main__":
    main()
