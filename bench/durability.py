"""What each commit rule costs: the push-fetch benchmark (`crossdock bench push-fetch`)
against an embedded cluster committing to memory, to disk, to a directory object store
and to a real S3 server (s3s-fs, built by scripts/setup.sh, started here on loopback),
and once more with every partition file evicted so that the reducers read from S3.

    .venv/bin/python bench/durability.py [--bytes 1GiB] [--runs 3] [--out DIR]

Every configuration runs --runs times inside one invocation of the benchmark, which
reports medians; this script prints them side by side with the ratio to `memory`
measured in the same run, and writes them to DIR/durability.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "crossdock"
S3S_FS = ROOT / ".tools" / "s3s-fs" / "bin" / "s3s-fs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """s3s-fs on a loopback port over a fresh directory, with one bucket."""

    def __init__(self):
        if not S3S_FS.exists():
            raise SystemExit(f"{S3S_FS} is missing: run `make setup` first")
        self.dir = tempfile.TemporaryDirectory(prefix="crossdock-s3-")
        (pathlib.Path(self.dir.name) / "bench").mkdir()
        port = free_port()
        self.proc = subprocess.Popen(
            [str(S3S_FS), "--host", "127.0.0.1", "--port", str(port), "--access-key",
             os.environ["AWS_ACCESS_KEY_ID"], "--secret-key", os.environ["AWS_SECRET_ACCESS_KEY"],
             self.dir.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("s3s-fs did not start listening within 10 s")
                time.sleep(0.05)
        self.url = f"s3://bench?endpoint=http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.dir.cleanup()


def run(label: str, args: list[str], size: str, runs: int) -> dict:
    cmd = [str(BINARY), "bench", "push-fetch", "--bytes", size, "--runs", str(runs), "--json",
           *args]
    print(f"== {label}: {' '.join(cmd[1:])}", flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    print(out, end="")
    result = json.loads(out.strip().splitlines()[-1])
    result["label"] = label
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    a = ap.parse_args()
    if not BINARY.exists():
        raise SystemExit(f"{BINARY} is missing: run `make build` first")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "crossdock-bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "crossdock-bench-secret")
    s3 = S3Server()
    store_dir = tempfile.TemporaryDirectory(prefix="crossdock-store-")
    try:
        configs = [
            ("memory", []),
            ("disk", ["--durability", "disk"]),
            ("object-store (directory)",
             ["--durability", "object-store", "--object-store", f"file://{store_dir.name}"]),
            ("object-store (S3, s3s-fs)",
             ["--durability", "object-store", "--object-store", s3.url]),
            # A quota of one byte evicts every uploaded file: all reads go to S3.
            ("S3, evicted: reads from S3",
             ["--durability", "object-store", "--object-store", s3.url, "--disk-quota", "1"]),
        ]
        results = [run(label, args, a.bytes, a.runs) for label, args in configs]
    finally:
        s3.stop()
        store_dir.cleanup()
    base = results[0]
    print(f"\n{'commit rule':28} {'push GB/s':>10} {'fetch GB/s':>11} {'end-to-end':>11}"
          f" {'push p99 ms':>12} {'push vs memory':>15}")
    for r in results:
        print(f"{r['label']:28} {r['push_gbps']:>10.2f} {r['fetch_gbps']:>11.2f}"
              f" {r['end_to_end_gbps']:>11.2f} {r['push_latency_p99_ms']:>12.1f}"
              f" {r['push_gbps'] / base['push_gbps']:>14.2f}x")
    bad = [r["label"] for r in results if not r["verified"]]
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "durability.json").write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out / 'durability.json'}")
    if bad:
        sys.exit(f"data read back differs from what was pushed: {bad}")


if __name__ == "__main__":
    main()
