"""CPU time of decoding record batches to Arrow (``format.arrow.decode_to_arrow``): a ``format("seglog")``
task's work per row. One 4 MiB chunk of 135-record batches of 100-byte JSON-like values (the records of
``connector_bench``), decoded again and again, in CPU nanoseconds per row (``time.process_time``, which a
loaded machine disturbs far less than wall time).

``--before CHECKOUT`` decodes with that checkout's ``format`` package as well, copied and imported under
another name in the same process, the two taking turns round by round; the figure to compare is the median
of the per-round ratios, since this machine's speed moves from one minute to the next.

    python bench/decode_bench.py [--rounds 15] [--before ../other-checkout]
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from connector_bench import BATCH_RECORDS, make_records  # noqa: E402

import format.arrow  # noqa: E402
from format.record_batch import build_batch  # noqa: E402

CHUNK_BYTES = 4 * 1024 * 1024
DECODES_PER_ROUND = 10


def chunk(seed: int = 42) -> bytes:
    """Whole batches with consecutive offsets, up to ``CHUNK_BYTES``."""
    rng, parts, size, offset = random.Random(seed), [], 0, 0
    while True:
        batch = build_batch(make_records(BATCH_RECORDS, 1_767_225_600_000, rng), base_offset=offset)
        if size + len(batch) > CHUNK_BYTES:
            return b"".join(parts)
        parts.append(batch)
        size += len(batch)
        offset += BATCH_RECORDS


def package_of(checkout: str, scratch: str):
    """``checkout``'s ``format`` package as ``format_before`` (its absolute imports of ``format`` renamed)."""
    target = os.path.join(scratch, "format_before")
    shutil.copytree(os.path.join(checkout, "format"), target)
    for name in os.listdir(target):
        if name.endswith(".py"):
            path = os.path.join(target, name)
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(re.sub(r"\b(from|import) format\b", r"\1 format_before", text))
    sys.path.insert(0, scratch)
    return importlib.import_module("format_before.arrow")


def per_row_ns(decode, data: bytes, rows: int) -> float:
    start = time.process_time()
    for _ in range(DECODES_PER_ROUND):
        decode(data, topic="bench", partition=0)
    return (time.process_time() - start) / DECODES_PER_ROUND / rows * 1e9


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--before", metavar="CHECKOUT", help="another checkout to decode with, taking turns")
    args = p.parse_args(argv)
    data = chunk()
    decoders = {"this checkout": format.arrow.decode_to_arrow}
    with tempfile.TemporaryDirectory(prefix="seglog-decode-bench-") as scratch:
        if args.before:
            before = package_of(args.before, scratch).decode_to_arrow
            if not before(data, topic="bench", partition=0).equals(decoders["this checkout"](
                    data, topic="bench", partition=0)):
                raise AssertionError(f"{args.before} decodes the chunk differently")
            decoders = {"before": before, **decoders}
        rows = decoders["this checkout"](data, topic="bench", partition=0).num_rows
        figures = {name: [] for name in decoders}
        for _ in range(args.rounds):
            for name, decode in decoders.items():
                figures[name].append(per_row_ns(decode, data, rows))
    print(f"{rows:,} records in {len(data):,} bytes, {args.rounds} rounds of {DECODES_PER_ROUND} decodes")
    for name, values in figures.items():
        print(f"{name}: {min(values):.0f} ns/row of CPU (best), {statistics.median(values):.0f} (median)")
    if args.before:
        ratio = statistics.median(a / b for b, a in zip(figures["before"], figures["this checkout"]))
        print(f"this checkout / before, median of the rounds: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
