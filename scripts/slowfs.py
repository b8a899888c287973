#!/usr/bin/env python3
"""A slow disk for benchmarks: a FUSE file system that passes every call through to a
directory on a real one, and writes no faster than a set rate.

    scripts/slowfs.py BACKING MOUNTPOINT --write-mbps 40

It stays in the foreground until unmounted (`fusermount -u MOUNTPOINT`) or signalled.

Why FUSE and not the kernel's own throttles: this machine has cgroup v1 only, whose blkio
throttle does not see buffered writeback, and no device-mapper (dm-delay). FUSE without
its writeback cache sends every write(2) to this process as it happens, so a worker whose
data directory is here sees the slow device at its own write and flush calls, not minutes
later when the page cache decides to write back.

The throttle is one token bucket shared by every file: a write of n bytes waits until the
device would have finished the writes before it and n more bytes at the rate. Reads,
metadata and fsync pass through unthrottled.

Needs libfuse 2 (Debian's `fuse` and `libfuse2`) and `fusepy`; `bench/congestion.py`
installs them when missing.
"""

import argparse
import errno
import os
import threading
import time

from fuse import FUSE, FuseOSError, Operations


class Throttle:
    """Paces writes to `rate` bytes a second across all threads."""

    def __init__(self, rate: float):
        self.rate = rate
        self.lock = threading.Lock()
        self.free_at = time.monotonic()  # when the device finishes what it was given

    def wait(self, n: int) -> None:
        with self.lock:
            start = max(time.monotonic(), self.free_at)
            self.free_at = start + n / self.rate
            done = self.free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class Passthrough(Operations):
    """Every call goes to the same path under `root`; writes wait for the throttle."""

    def __init__(self, root: str, throttle: Throttle):
        self.root = os.path.realpath(root)
        self.throttle = throttle

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def __call__(self, op, path, *args):
        try:
            return super().__call__(op, self._full(path) if isinstance(path, str) else path, *args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)

    # Metadata: the backing directory's own.
    def access(self, path, mode):
        if not os.access(path, mode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def chown(self, path, uid, gid):
        os.chown(path, uid, gid)

    def getattr(self, path, fh=None):
        st = os.lstat(path)
        return {k: getattr(st, k) for k in (
            "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid",
            "st_blocks")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(path)

    def readlink(self, path):
        return os.readlink(path)

    def mknod(self, path, mode, dev):
        os.mknod(path, mode, dev)

    def mkdir(self, path, mode):
        os.mkdir(path, mode)

    def rmdir(self, path):
        os.rmdir(path)

    def unlink(self, path):
        os.unlink(path)

    def symlink(self, target, source):
        os.symlink(source, target)

    def link(self, target, source):
        os.link(self._full(source), target)

    def rename(self, old, new):
        os.rename(old, self._full(new))

    def utimens(self, path, times=None):
        os.utime(path, times)

    def statfs(self, path):
        st = os.statvfs(path)
        return {k: getattr(st, k) for k in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
            "f_frsize", "f_namemax")}

    # Files: file handles are the backing file descriptors.
    def open(self, path, flags):
        return os.open(path, flags)

    def create(self, path, mode, fi=None):
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        self.throttle.wait(len(data))
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is None:
            os.truncate(path, length)
        else:
            os.ftruncate(fh, length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)

    def release(self, path, fh):
        os.close(fh)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backing", help="the directory that holds the data")
    ap.add_argument("mountpoint")
    ap.add_argument("--write-mbps", type=float, required=True,
                    help="the write rate in MB/s (10^6 bytes a second)")
    args = ap.parse_args()
    if args.write_mbps <= 0:
        ap.error("--write-mbps must be positive")
    os.makedirs(args.backing, exist_ok=True)
    os.makedirs(args.mountpoint, exist_ok=True)
    print(f"slowfs: {args.mountpoint} -> {args.backing}, writes at {args.write_mbps:g} MB/s", flush=True)
    FUSE(Passthrough(args.backing, Throttle(args.write_mbps * 1e6)), args.mountpoint,
         foreground=True, nothreads=False, big_writes=True, max_write=1 << 20)


if __name__ == "__main__":
    main()
