"""Registrations and heartbeats with up to 100,000 shuffles registered (issue 12, limits):
a fresh `crossdock standalone --no-auth` (2 workers), one app registering shuffles of
4 maps x 8 partitions over one connection, 64 requests in flight, through raw frames
(docs/protocol.md). After every tenth of the shuffles it times 200 more registrations
one at a time, 200 heartbeats (as a worker sends them) and 50 status requests, and
reports their median and p99 round trips, then the workers the coordinator still
counts alive. Usage: .venv/bin/python bench/many_shuffles.py [--shuffles 100000]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "crossdock"
REGISTER_APP, REGISTER_SHUFFLE, GET_STATUS, HEARTBEAT, ERROR = 0x10, 0x13, 0x18, 0x22, 0x02
# The wire protocol version these frames speak (docs/protocol.md).
PROTOCOL_VERSION = 2


def string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">H", len(raw)) + raw


class Conn:
    """One connection: frames out, frames in, matched by request id."""

    def __init__(self, addr: str):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_id = 1
        self.buf = b""

    def send(self, kind: int, body: bytes) -> int:
        rid = self.next_id
        self.next_id += 1
        self.s.sendall(struct.pack(">IBBHQ", 12 + len(body), PROTOCOL_VERSION, kind, 0, rid) + body)
        return rid

    def recv(self) -> tuple[int, int, bytes]:
        while True:
            if len(self.buf) >= 16:
                length, _v, kind, _f, rid = struct.unpack(">IBBHQ", self.buf[:16])
                end = 4 + length
                if len(self.buf) >= end:
                    body, self.buf = self.buf[16:end], self.buf[end:]
                    if kind == ERROR:
                        code, n = struct.unpack(">HH", body[:4])
                        raise RuntimeError(f"error {code}: {body[4:4 + n].decode()}")
                    return rid, kind, body
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk

    def call(self, kind: int, body: bytes) -> float:
        start = time.perf_counter()
        self.send(kind, body)
        self.recv()
        return time.perf_counter() - start


def quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return xs[len(xs) // 2] * 1e3, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3


def metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + " "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shuffles", type=int, default=100_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([str(BINARY), "standalone", "--no-auth", "--listen", "127.0.0.1:0",
                                 "--workers", "2", "--memory", "256MiB", "--data-dir", d,
                                 "--metrics-listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "CROSSDOCK_LOG": "warn"})
        try:
            addr = metrics = None
            while addr is None or metrics is None:
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit("crossdock standalone exited")
                if m := re.match(r"crossdock standalone listening on (\S+)", line):
                    addr = m.group(1)
                if m := re.match(r"metrics on (\S+)", line):
                    metrics = m.group(1)
            c = Conn(addr)
            app = "many-shuffles"
            c.call(REGISTER_APP, string(app) + struct.pack(">I", 3_600_000))
            # The worker ids the coordinator gave (heartbeats name one).
            worker = next(w for w in range(4) if _heartbeat_ok(c, w))
            next_shuffle, step = 0, max(1, a.shuffles // 10)
            print(f"{'registered':>10} {'register p50/p99 ms':>20} {'heartbeat p50/p99 ms':>21} "
                  f"{'status p50/p99 ms':>18} {'bulk reg/s':>10}")
            while True:
                reg = [c.call(REGISTER_SHUFFLE, string(app) + struct.pack(">III", next_shuffle + i, 4, 8))
                       for i in range(200)]
                next_shuffle += 200
                hb = [c.call(HEARTBEAT, struct.pack(">IQQB", worker, 0, 0, 0)) for _ in range(200)]
                st = [c.call(GET_STATUS, string(app) + struct.pack(">I", i)) for i in range(50)]
                # Bulk: the next tenth (leaving 200 for the last timed round), 64 in flight.
                target = min(a.shuffles - 200, next_shuffle + step - 200)
                if next_shuffle >= a.shuffles or target <= next_shuffle:
                    print(f"{next_shuffle:>10} {'%.3f / %.3f' % quantiles(reg):>20} "
                          f"{'%.3f / %.3f' % quantiles(hb):>21} {'%.3f / %.3f' % quantiles(st):>18}")
                    break
                start, sent, inflight = time.perf_counter(), next_shuffle, 0
                n0 = next_shuffle
                while sent < target or inflight:
                    while sent < target and inflight < 64:
                        c.send(REGISTER_SHUFFLE, string(app) + struct.pack(">III", sent, 4, 8))
                        sent += 1
                        inflight += 1
                    c.recv()
                    inflight -= 1
                next_shuffle = target
                rate = f"{(target - n0) / (time.perf_counter() - start):10.0f}"
                print(f"{n0:>10} {'%.3f / %.3f' % quantiles(reg):>20} {'%.3f / %.3f' % quantiles(hb):>21} "
                      f"{'%.3f / %.3f' % quantiles(st):>18} {rate}")
            print(f"shuffles registered: {metric(metrics, 'crossdock_coordinator_shuffles'):.0f}, "
                  f"workers alive: {metric(metrics, 'crossdock_coordinator_workers_alive'):.0f}, "
                  f"lost: {metric(metrics, 'crossdock_coordinator_workers_lost'):.0f}")
        finally:
            proc.terminate()
            try:
                start = time.perf_counter()
                proc.wait(timeout=300)
                print(f"standalone stopped in {time.perf_counter() - start:.1f} s")
            except subprocess.TimeoutExpired:
                proc.kill()
                print("standalone did not stop within 300 s; killed")


def _heartbeat_ok(c: Conn, worker: int) -> bool:
    try:
        c.call(HEARTBEAT, struct.pack(">IQQB", worker, 0, 0, 0))
        return True
    except RuntimeError:
        return False


if __name__ == "__main__":
    main()
