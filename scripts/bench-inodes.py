#!/usr/bin/env python3
"""Issue 29: the kernel time of creating what a small session creates (20 directories, 60 files in them and 5
beside them: about the 85 inodes of a 3-step session's loose objects, fan-out directories, locks, journal and
checkout), on a quiet file system and then at intervals after writing and deleting N files beside it.

usage: scripts/bench-inodes.py [--files N] [--dir DIR]   (DIR: on the file system to test; default a temp dir)

On ext4 without a journal (`/sys/fs/ext4/<dev>/journal_task` says <none>), the inode allocator skips every free
inode that was deleted in the last 60 s, or 360 s while its inode-table block is not written back
(fs/ext4/ialloc.c, recently_deleted()), each skip a buffer-cache lookup: right after a mass deletion, every new
file or directory in the same block groups walks thousands of them.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

WAITS = [0, 10, 30, 60, 120, 240, 400]


def create(base, tag):
    d = os.path.join(base, "c-" + tag)
    os.makedirs(d)
    t0, w0 = os.times(), time.perf_counter()
    for i in range(20):
        sub = os.path.join(d, "%02x" % i)
        os.mkdir(sub)
        for j in range(3):
            fd = os.open(os.path.join(sub, "f%d" % j), os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, b"x" * 100)
            os.close(fd)
    for j in range(5):
        os.close(os.open(os.path.join(d, "g%d" % j), os.O_CREAT | os.O_WRONLY, 0o644))
    t1, w1 = os.times(), time.perf_counter()
    return (t1.system - t0.system) * 1000, (w1 - w0) * 1000


def load(base, n):
    top = os.path.join(base, "load")
    dirs = [os.path.join(top, "d%02d" % i) for i in range(100)]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    for i in range(n):
        fd = os.open(os.path.join(dirs[i % 100], "f%06d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x" * 200)
        os.close(fd)
    shutil.rmtree(top)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--dir")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-inodes.", dir=a.dir)
    try:
        print("before the load: kernel %.0f ms, wall %.1f ms (85 inodes; kernel time in 10 ms ticks)" % create(
            base, "quiet"), flush=True)
        load(base, a.files)
        t = time.monotonic()
        for k, wait in enumerate(WAITS):
            time.sleep(max(0.0, wait - (time.monotonic() - t)))
            print("%4d s after writing and deleting %d files: kernel %.0f ms, wall %.1f ms" % (
                (wait, a.files) + create(base, str(k))), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("command: " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
