"""What filled a JVM's heap: a class histogram of an HPROF heap dump (shallow sizes), and which
classes point at its large byte arrays, read without any tool beyond Python.

    python3 bench/heap_histogram.py java_pid1234.hprof [--top 25] [--min-array-kib 16]

`bench/min_memory.py --heap-dumps` makes every executor that runs out of heap write such a
dump into the trial's directory. The dump holds every object on the heap at that moment,
garbage included; the byte arrays named below are those some object still points at (one
level: a frame body held by the buffers sliced from it is named under `HeapByteBufferR`).
"""

from __future__ import annotations

import argparse
import collections
import struct
import sys

# HPROF basic types: size of each (2 = object id, sized by the dump's id size).
PRIMITIVE_SIZE = {4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}
PRIMITIVE_NAME = {4: "boolean[]", 5: "char[]", 6: "float[]", 7: "double[]", 8: "byte[]",
                  9: "short[]", 10: "int[]", 11: "long[]"}


class Dump:
    """The parts of a heap dump the histogram needs, parsed in one pass."""

    def __init__(self, data: bytes, min_array: int):
        self.data = data
        p = data.index(b"\0") + 1
        self.idsz = struct.unpack(">I", data[p:p + 4])[0]
        p += 12
        self.size = {**PRIMITIVE_SIZE, 2: self.idsz}
        self.strings: dict[int, str] = {}
        self.class_name_id: dict[int, int] = {}
        self.super_of: dict[int, int] = {}
        self.fields: dict[int, list[int]] = {}  # class -> types of its instance fields
        self.bytes_by = collections.Counter()
        self.count_by = collections.Counter()
        self.arrays: dict[int, int] = {}  # id -> length of byte arrays >= min_array
        self.objects: list[tuple[object, int, int]] = []  # (class, data offset, data length)
        while p < len(data):
            tag = data[p]
            length = struct.unpack(">I", data[p + 5:p + 9])[0]
            body = p + 9
            p = body + length
            if tag == 0x01:
                self.strings[self.id(body)] = data[body + self.idsz:body + length].decode("utf8", "replace")
            elif tag == 0x02:
                self.class_name_id[self.id(body + 4)] = self.id(body + 8 + self.idsz)
            elif tag in (0x0C, 0x1C):
                self.segment(body, body + length, min_array)

    def id(self, at: int) -> int:
        return int.from_bytes(self.data[at:at + self.idsz], "big")

    def segment(self, q: int, end: int, min_array: int) -> None:
        d, n32, idsz = self.data, (lambda at: struct.unpack(">I", self.data[at:at + 4])[0]), self.idsz
        while q < end:
            sub = d[q]
            q += 1
            if sub == 0xFF:  # root unknown
                q += idsz
            elif sub == 0x01:  # JNI global
                q += 2 * idsz
            elif sub in (0x02, 0x03, 0x08):  # JNI local, Java frame, thread object
                q += idsz + 8
            elif sub in (0x04, 0x05, 0x07):  # native stack, sticky class, monitor used
                q += idsz
            elif sub == 0x06:  # thread block
                q += idsz + 4
            elif sub == 0x20:  # class dump
                cls = self.id(q)
                q += idsz + 4
                self.super_of[cls] = self.id(q)
                q += idsz * 6 + 4
                u2 = lambda at: struct.unpack(">H", d[at:at + 2])[0]  # noqa: E731
                n = u2(q)
                q += 2
                for _ in range(n):  # constant pool: index, type, value
                    q += 2
                    q += 1 + self.size[d[q]]
                n = u2(q)
                q += 2
                for _ in range(n):  # static fields: name, type, value
                    q += idsz
                    q += 1 + self.size[d[q]]
                n = u2(q)
                q += 2
                types = []
                for _ in range(n):  # instance fields: name, type
                    types.append(d[q + idsz])
                    q += idsz + 1
                self.fields[cls] = types
            elif sub == 0x21:  # instance
                q += idsz + 4
                cls = self.id(q)
                q += idsz
                n = n32(q)
                q += 4
                self.bytes_by[cls] += n + 16
                self.count_by[cls] += 1
                self.objects.append((cls, q, n))
                q += n
            elif sub == 0x22:  # object array
                q += idsz + 4
                n = n32(q)
                q += 4
                cls = ("array", self.id(q))
                q += idsz
                self.bytes_by[cls] += n * idsz + 16
                self.count_by[cls] += 1
                self.objects.append((cls, q, n * idsz))
                q += n * idsz
            elif sub == 0x23:  # primitive array
                oid = self.id(q)
                q += idsz + 4
                n, t = n32(q), d[q + 4]
                q += 5
                size = n * PRIMITIVE_SIZE[t]
                self.bytes_by[PRIMITIVE_NAME[t]] += size + 16
                self.count_by[PRIMITIVE_NAME[t]] += 1
                if t == 8 and size >= min_array:
                    self.arrays[oid] = size
                q += size
            else:
                raise SystemExit(f"unknown heap dump record {sub:#x} at byte {q}: not an HPROF 1.0.2 dump?")

    def name(self, cls) -> str:
        if isinstance(cls, str):
            return cls
        if isinstance(cls, tuple):
            return self.strings.get(self.class_name_id.get(cls[1]), "?")  # the array class: "[L...;"
        return self.strings.get(self.class_name_id.get(cls), "?")

    def references(self, cls, at: int, length: int):
        """The object ids an object's data holds."""
        if isinstance(cls, tuple):
            for o in range(at, at + length, self.idsz):
                yield self.id(o)
            return
        c = cls
        while c:
            for t in self.fields.get(c, ()):
                if t == 2:
                    yield self.id(at)
                at += self.size[t]
            c = self.super_of.get(c)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", help="an HPROF heap dump (java_pid<N>.hprof)")
    ap.add_argument("--top", type=int, default=25, help="classes to list [25]")
    ap.add_argument("--min-array-kib", type=int, default=16, help="byte arrays at least this large are traced [16]")
    args = ap.parse_args()
    with open(args.dump, "rb") as f:
        dump = Dump(f.read(), args.min_array_kib << 10)
    total = sum(dump.bytes_by.values())
    print(f"{total / 2**20:.1f} MiB of objects (shallow), garbage included")
    for cls, size in dump.bytes_by.most_common(args.top):
        print(f"{size / 2**20:9.2f} MiB {dump.count_by[cls]:9d}  {dump.name(cls)}")
    held: dict[str, dict[int, int]] = {}
    for cls, at, length in dump.objects:
        for ref in dump.references(cls, at, length):
            if ref in dump.arrays:
                held.setdefault(dump.name(cls), {})[ref] = dump.arrays[ref]
    big = sum(dump.arrays.values())
    print(f"\nbyte arrays of {args.min_array_kib} KiB and more: {len(dump.arrays)}, {big / 2**20:.1f} MiB; pointed at by")
    for name, arrays in sorted(held.items(), key=lambda kv: -sum(kv[1].values())):
        sizes = sorted(arrays.values(), reverse=True)
        top = ", ".join(f"{s / 2**20:.1f}" for s in sizes[:6])
        print(f"{sum(sizes) / 2**20:9.2f} MiB {len(sizes):6d}  {name} (largest MiB: {top})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
