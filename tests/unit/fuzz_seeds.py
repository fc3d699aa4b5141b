#!/usr/bin/env python3
"""Write the hand-made seed inputs of fuzz_api.c (the lifecycle of a buffer on each
backend, the usual misuse, the threaded mode) into a directory.  The committed corpus
(fuzz-corpus/api) grew from these by fuzzing and `make fuzz-merge`; rerun this only to
start a corpus afresh.  The input format is described at the top of fuzz_api.c."""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

# Operation codes, in the order of enum opcode in fuzz_api.c.
(
    OPEN,
    CLOSE,
    PIN,
    PIN_V2,
    UNPIN,
    MAP,
    UNMAP,
    INFO,
    INFO_V1,
    CB_FLAG,
    COPY_TO,
    COPY_FROM,
    ROUNDTRIP,
    COPY_TYPE,
    DRIVER_VERSION,
    ATTR,
    TYPE_STRING,
    RUNTIME_VERSION,
    BACKEND_NAME,
    ALLOC,
    FREE,
    INVALIDATE,
) = range(22)

GDRDRV, DMABUF, VULKAN = 0, 2, 3
NULL_G = 2  # g index NG: a NULL gdr_t
ONE_GPU_PAGE = 0x60  # size selector: (raw & 63) + 1 GPU pages
WHOLE_HINT = 0x80  # size selector: the hint (pin or mapping size)
HUGE = 0xA0  # size selector: SIZE_MAX and friends
BIG = 0xC0  # size selector: (raw & (4 MiB - 1)) + 1


def op(
    code: int,
    g: int = 0,
    h: int = 0,
    flags: int = 0,
    size_sel: int = ONE_GPU_PAGE,
    off_sel: int = 0,
    aux: int = 0,
    aux2: int = 0,
    raw: int = 0,
) -> bytes:
    return struct.pack("<8BQ", code, g, h, flags, size_sel, off_sel, aux, aux2, raw & (2**64 - 1))


def header(backend: int, variant: int = 0, threads: int = 0, repeat: int = 0, slots: int = 0) -> bytes:
    return bytes([backend | (threads << 2), variant, repeat, slots])


def lifecycle() -> list[bytes]:
    """Pin, map, copy both ways, inspect, unmap, unpin: the well-behaved path, then misuse."""
    return [
        op(ALLOC, size_sel=ONE_GPU_PAGE, raw=3),
        op(PIN_V2, h=0, raw=0),
        op(MAP, h=0, size_sel=ONE_GPU_PAGE, raw=0),
        op(ROUNDTRIP, h=0, off_sel=0, size_sel=WHOLE_HINT),
        op(ROUNDTRIP, h=0, off_sel=3, size_sel=0x1F, aux=5),
        op(COPY_TO, h=0, off_sel=0x20, size_sel=0x04),
        op(COPY_FROM, h=0, off_sel=0xE0, size_sel=0x40, raw=0x12345 << 16),
        op(ROUNDTRIP, h=0, flags=8 | 4, aux2=4, size_sel=WHOLE_HINT),
        op(INFO, h=0),
        op(INFO_V1, h=0),
        op(CB_FLAG, h=0),
        op(MAP, h=0),  # mapped already: EAGAIN
        op(UNMAP, h=0, flags=0x40, off_sel=0x03),  # wrong address
        op(UNMAP, h=0, size_sel=WHOLE_HINT),
        op(UNMAP, h=0),  # twice
        op(COPY_TO, h=0),  # not mapped
        op(UNPIN, h=0),
        op(UNPIN, h=0),  # stale
        op(INFO, h=0),
        op(ROUNDTRIP, h=0),
        op(FREE, aux2=0),
        op(CLOSE),
    ]


def wrong_order() -> list[bytes]:
    """Unpin while mapped, close with buffers pinned and mapped, use after close, a second gdr_t."""
    return [
        op(ALLOC, raw=7),
        op(OPEN, g=1),
        op(PIN_V2, h=0, raw=0),
        op(PIN, h=1, raw=1 | (1 << 8)),
        op(PIN_V2, g=1, h=2, raw=2),
        op(MAP, h=0),
        op(MAP, h=1, size_sel=WHOLE_HINT),
        op(MAP, g=1, h=0),  # foreign gdr_t
        op(UNPIN, g=1, h=1),  # foreign gdr_t
        op(FREE, aux2=0),  # still pinned
        op(UNPIN, h=0),  # while mapped
        op(ROUNDTRIP, h=0),  # stale
        op(CLOSE, g=0),  # with h1 pinned and mapped
        op(ROUNDTRIP, h=1),  # handle of a closed gdr_t
        op(INFO, g=1, h=1),
        op(MAP, g=1, h=2),
        op(ROUNDTRIP, h=2, size_sel=WHOLE_HINT),
        op(CLOSE, g=NULL_G),
        op(CLOSE, g=1),
    ]


def bad_arguments() -> list[bytes]:
    """NULL gdr_t and outputs, size 0, huge and unaligned sizes and addresses, unknown flags and types."""
    ops = [
        op(PIN_V2, g=NULL_G, h=0),
        op(PIN_V2, h=0, flags=0x70),  # NULL handle out
        op(PIN_V2, h=0, size_sel=0),  # size 0
        op(PIN_V2, h=0, flags=0x80, raw=0xFFFF_FFFE << 32),  # unknown flags
        op(PIN_V2, h=0, size_sel=HUGE, raw=0),
        op(PIN_V2, h=1, aux=0x40, aux2=5, raw=3),  # unaligned address
        op(PIN_V2, h=2, aux=0x60),  # address 0
        op(PIN_V2, h=3, aux=0x80),  # ULONG_MAX
        op(PIN, h=4, flags=2 | 4, aux=9, raw=0x1234_0000_0000),  # tokens
        op(PIN_V2, h=5, size_sel=BIG, raw=0x3F_0000_0100),
        op(MAP, h=1),
        op(MAP, h=5, size_sel=HUGE),
        op(MAP, h=5, size_sel=0),
        op(MAP, h=5, flags=0x80, raw=7 << 32),
        op(MAP, h=5, flags=0x70),
        op(MAP, h=5, flags=2),
        op(MAP, h=5, flags=3),
        op(MAP, h=5, size_sel=WHOLE_HINT),
        op(ROUNDTRIP, h=5, off_sel=0x3F, size_sel=WHOLE_HINT),
        op(COPY_TO, h=5, off_sel=0x21, size_sel=0x10),  # past the end
        op(COPY_FROM, h=5, off_sel=0x81),  # before the start
        op(COPY_TO, h=5, off_sel=0xA0, raw=2**64 - 1),
        op(COPY_TO, h=5, size_sel=HUGE, raw=5),
        op(ROUNDTRIP, h=5, flags=16, size_sel=0x1F),
        op(UNMAP, g=NULL_G, h=5),
        op(INFO, h=5, flags=0x70),
        op(CB_FLAG, h=5, flags=0x70),
        op(INVALIDATE, h=5),
        op(CB_FLAG, h=5),
        op(DRIVER_VERSION),
        op(DRIVER_VERSION, flags=1),
        op(DRIVER_VERSION, g=NULL_G),
        op(ATTR, aux=1),
        op(ATTR, aux=2),
        op(ATTR, aux=3),
        op(ATTR, aux=4),
        op(ATTR, aux=0),
        op(ATTR, flags=0x80, raw=-5),
        op(TYPE_STRING, aux=0),
        op(TYPE_STRING, aux=4),
        op(TYPE_STRING, flags=0x80, raw=2**31),
        op(RUNTIME_VERSION),
        op(RUNTIME_VERSION, flags=0x71),
        op(BACKEND_NAME),
        op(BACKEND_NAME, g=NULL_G),
        op(ALLOC, g=NULL_G),
        op(ALLOC, flags=0x70),
        op(ALLOC, size_sel=0),
        op(ALLOC, aux2=1, size_sel=HUGE),
        op(FREE, aux2=3, flags=0x40, raw=0xDEAD_0000),
        op(COPY_TYPE, flags=1, size_sel=0x3F, off_sel=0x05),
        op(COPY_TYPE, flags=3, size_sel=BIG, raw=0x7FF_0000),
        op(COPY_TYPE, flags=0x80, raw=9 << 32),
    ]
    for kind in range(8):  # never-issued handles of every kind
        ops += [
            op(UNPIN, h=0xC0 | kind, raw=0x7F12_3456_7890),
            op(INFO, h=0xC0 | kind, aux2=kind * 7),
            op(ROUNDTRIP, h=0xC0 | kind),
        ]
    return ops


def parallel_copies() -> list[bytes]:
    """A 1 MiB buffer copied whole and in part by several worker threads."""
    return [
        op(ALLOC, size_sel=ONE_GPU_PAGE, raw=15),
        op(PIN_V2, h=0, size_sel=ONE_GPU_PAGE, raw=15 << 8),
        op(MAP, h=0, size_sel=ONE_GPU_PAGE, raw=15),
        op(ROUNDTRIP, h=0, flags=8 | 4, aux2=4, size_sel=WHOLE_HINT),
        op(ROUNDTRIP, h=0, flags=8 | 4, aux2=2, off_sel=0x05, size_sel=BIG, raw=0x9_0003 << 16),
        op(COPY_TO, h=0, flags=8 | 4, aux2=8, off_sel=0xE3, size_sel=BIG, raw=0x7_FFF0 << 16),
        op(COPY_FROM, h=0, flags=8 | 4, aux2=3, size_sel=BIG, raw=0xF_FFFF << 16),
        op(UNMAP, h=0),
        op(UNPIN, h=0),
        op(FREE),
    ]


def threaded() -> list[bytes]:
    ops = []
    for i in range(4):
        ops += [
            op(PIN_V2, h=i % 2, raw=i),
            op(MAP, h=i % 2),
            op(ROUNDTRIP, h=i % 2, size_sel=0x3F),
            op(INFO, h=i % 2),
            op(UNMAP, h=i % 2),
            op(COPY_FROM, h=i % 2, size_sel=BIG, raw=0x40000 << 16, flags=4, aux2=3),
            op(UNPIN, h=i % 2),
            op(ALLOC, aux2=i, raw=i),
            op(COPY_TYPE, flags=1 | 4, aux2=i),
            op(FREE, aux2=i),
        ]
    return ops


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz-seeds")
    out.mkdir(parents=True, exist_ok=True)
    inputs: list[bytes] = []
    for backend, variants in (
        (GDRDRV, (0x0C, 0x04, 0x02, 0x00, 0x3C, 0x5C, 0x9C, 0xDC)),
        (DMABUF, (0, 1, 2, 3)),
        (VULKAN, (0x10, 0x11, 0x02, 0x60, 0x80, 0xA0, 0xC0, 0xE0)),
    ):
        for variant in variants:
            for ops in (lifecycle(), wrong_order(), bad_arguments()):
                inputs.append(header(backend, variant) + b"".join(ops))
        inputs.append(header(backend, variants[0] | 0x0C) + b"".join(parallel_copies()))
        for threads in (1, 2, 3):
            for slots in (0, 1, 7):  # every thread on one handle, on two, on eight
                inputs.append(header(backend, variants[0], threads, 3, slots) + b"".join(threaded()))
    for data in inputs:
        (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{len(inputs)} seeds in {out}")


if __name__ == "__main__":
    main()
