"""Mutations of real trace files, for fuzzing the readers (``tests/test_read_fuzz.py`` and
``benchmarks/fuzz_campaign.py``).

Each mutation takes the decompressed bytes of a real fixture and a seeded random generator and
returns new file content: byte flips, truncation, JSON type swaps, huge and non-finite numbers,
deep nesting, times going backwards, a BOM, a trailing empty event, and compression bombs
(compressed again as gzip or zstd).
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Callable
from pathlib import Path

import zstandard

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SCALAR = re.compile(rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null')
_SWAPS = (b"null", b"[]", b"{}", b'"x"', b"true", b"-1", b"0.5", b'{"a": [1]}')
_HUGE = (b"1e30", b"-1e308", b"1" * 40, b"1e999", b"9223372036854775808", b"-0", b"NaN")


def seed_files(max_bytes: int | None = None) -> list[tuple[str, bytes]]:
    """(name, decompressed content) of every real fixture the readers accept. With
    ``max_bytes``, a larger fixture keeps its records up to that size (cut after the last whole
    line or JSON-SEQ record that fits; a document with no such boundary is kept whole): reading a
    mutated copy of the whole 28 MB stock trace tests the same structures as its first records,
    at 14 times the bytes."""
    from quicsm.qlog.blocks import DecompressedFile

    out = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.name != "run.json":
            data = b"".join(DecompressedFile(path).blocks())
            if max_bytes is not None and len(data) > max_bytes:
                cut = data.rfind(b"\n", 0, max_bytes)  # JSON-SEQ records end with a newline too
                data = data[: cut + 1] if cut > 0 else data
            out.append((str(path.relative_to(FIXTURES)), data))
    return out


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def swap_type(data: bytes, rng: random.Random) -> bytes:
    matches = list(_SCALAR.finditer(data))
    for m in rng.sample(matches, min(len(matches), rng.randint(1, 4))):
        data = data[: m.start()] + rng.choice(_SWAPS) + data[m.end() :]
        break  # offsets shift after one swap; one per call keeps them right
    return data


def huge_number(data: bytes, rng: random.Random) -> bytes:
    matches = list(_NUMBER.finditer(data))
    if not matches:
        return data
    m = rng.choice(matches)
    return data[: m.start()] + rng.choice(_HUGE) + data[m.end() :]


def deep_nesting(data: bytes, rng: random.Random) -> bytes:
    depth = rng.choice((100, 1000, 5000, 100_000))
    at = data.find(b'"data": ')
    nested = b"[" * depth + b"]" * depth if rng.random() < 0.8 else b"[" * depth
    if at == -1:
        return nested + data
    at += len(b'"data": ')
    return data[:at] + nested + b", " + data[at:]


def time_backwards(data: bytes, rng: random.Random) -> bytes:
    times = list(re.finditer(rb'"time": ?(-?\d+(?:\.\d+)?)', data))
    if not times:
        return data
    m = rng.choice(times)
    return data[: m.start(1)] + rng.choice((b"-5", b"0", b"-1e12")) + data[m.end(1) :]


def bom_or_empty_event(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return b"\xef\xbb\xbf" + data
    return data.replace(b"]}]", b", []]}]", 1)


#: how large a bomb inflates, in MiB (the campaign adds larger ones)
BOMB_MIB = [1, 8, 24]


def bomb(data: bytes, rng: random.Random) -> bytes:
    """Repeat the file's body so it inflates far beyond its compressed size."""
    body = data[len(data) // 2 :] or b" "
    repeat = max(1, (rng.choice(BOMB_MIB) << 20) // len(body))
    text = data + body * repeat
    if rng.random() < 0.5:
        return gzip.compress(text, compresslevel=1)
    return zstandard.ZstdCompressor(level=1).compress(text)


def recompress(data: bytes, rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.3:
        return gzip.compress(data, compresslevel=1)
    if kind < 0.6:
        frame = zstandard.ZstdCompressor(level=1).compress(data)
        if rng.random() < 0.5:  # a skippable frame first (RFC 8878 section 3.1.2)
            frame = b"\x5a\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"meta" + frame
        return frame[: rng.randrange(len(frame) + 1)] if rng.random() < 0.3 else frame
    return data


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "flip": flip_bytes,
    "truncate": truncate,
    "swap": swap_type,
    "huge": huge_number,
    "nest": deep_nesting,
    "backwards": time_backwards,
    "variant": bom_or_empty_event,
    "bomb": bomb,
    "recompress": recompress,
}


def mutate(data: bytes, rng: random.Random, *, kinds: list[str] | None = None) -> bytes:
    """One to three mutations of ``data`` (bombs last: they compress)."""
    names = kinds or [n for n in MUTATIONS if n != "bomb"]
    chosen = rng.sample(names, min(len(names), rng.randint(1, 3)))
    for name in sorted(chosen, key=lambda n: n in ("bomb", "recompress")):
        if name in ("bomb", "recompress") and data[:2] in (b"\x1f\x8b", b"\x28\xb5"):
            continue
        data = MUTATIONS[name](data, rng)
    return data
