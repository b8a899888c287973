#!/usr/bin/env python3
"""Whether a worker's flush should bypass the page cache: buffered writes against O_DIRECT.

A worker that spills writes each batch into its partition file through the page cache: the
kernel copies the bytes into fresh page-cache pages (on this VM about 1.5x a socket copy
per byte, `docs/benchmarks-service.md`), and fetches of spilled data `pread` them back from there.
`O_DIRECT` skips that copy, but needs buffers, offsets and lengths aligned to the device's
blocks (so the batches would be copied into an aligned buffer in user space first), and
then every fetch of spilled data reads the device, not memory.

This measures both paths on the machine it runs on, with the data directory's own file
system: per GiB written, the writer's CPU time (user + system, so the kernel's copy is
counted) and the wall time, for
  - buffered: `write(2)` of 1 MiB pieces, `fdatasync` at the end (the worker's flush);
  - direct:   the same bytes copied into a 1 MiB page-aligned buffer, then written with
              `O_DIRECT` (what a flush without the page-cache copy would do);
and reading the file back: buffered (`pread` from the page cache, as a fetch does now)
against `O_DIRECT` from the device. Medians over `--runs`; every run uses a fresh file.

    .venv/bin/python bench/flush_path.py [--gib 2] [--runs 3] [--dir DIR] [--json]
"""

import argparse
import json
import mmap
import os
import resource
import statistics
import sys
import tempfile
import time

PIECE = 1 << 20


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn):
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu_seconds() - c0


def write_buffered(path, source, pieces):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(pieces):
            os.write(fd, source)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def write_direct(path, source, pieces):
    aligned = mmap.mmap(-1, PIECE)  # page-aligned, as O_DIRECT needs
    view = memoryview(aligned)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    try:
        for _ in range(pieces):
            view[:] = source  # the copy a worker would make from its receive buffers
            os.write(fd, view)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        view.release()
        aligned.close()


def read_back(path, pieces, direct):
    buf = mmap.mmap(-1, PIECE)
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    try:
        for i in range(pieces):
            n = os.preadv(fd, [buf], i * PIECE)
            if n != PIECE:
                raise SystemExit(f"short read at piece {i}: {n} bytes")
    finally:
        os.close(fd)
        buf.close()


def drop_cache(path):
    # Only this file's pages: the measurement must not disturb anything else.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0, help="bytes written per run, GiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--json", action="store_true", help="print one JSON object last")
    args = ap.parse_args()
    pieces = int(args.gib * 1024)
    gib = pieces / 1024
    source = os.urandom(PIECE)
    rows = {k: [] for k in ("buffered_write", "direct_write", "cached_read", "direct_read")}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="flush-path-") as d:
        for run in range(args.runs):
            for mode, writer in (("buffered", write_buffered), ("direct", write_direct)):
                path = os.path.join(d, f"{mode}-{run}")
                wall, cpu = timed(lambda: writer(path, source, pieces))
                rows[f"{mode}_write"].append({"wall_s": wall, "cpu_s": cpu})
                if mode == "buffered":
                    # Read while the pages are cached, as a fetch soon after a spill does.
                    wall, cpu = timed(lambda: read_back(path, pieces, False))
                    rows["cached_read"].append({"wall_s": wall, "cpu_s": cpu})
                else:
                    drop_cache(path)
                    wall, cpu = timed(lambda: read_back(path, pieces, True))
                    rows["direct_read"].append({"wall_s": wall, "cpu_s": cpu})
                os.unlink(path)
    report = {"gib_per_run": gib, "runs": args.runs}
    print(f"{gib:.2f} GiB per run, {args.runs} runs, medians:")
    print(f"{'':16} {'GB/s':>8} {'CPU s/GiB':>10}")
    for name, rs in rows.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        gbps = gib * (1 << 30) / wall / 1e9
        report[name] = {"gbps": gbps, "cpu_s_per_gib": cpu / gib, "runs": rs}
        print(f"{name:16} {gbps:8.2f} {cpu / gib:10.3f}")
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    sys.exit(main())
