"""How the broker process's allocator treats the buffers fetches are read into.

A fetch reads each partition's bytes (up to ``max.partition.fetch.bytes``, a
MiB by default) into a fresh buffer that is freed once the response is
written. glibc serves a buffer that large with ``mmap``, or gives the freed top
of its heap back to the kernel, so every fetch faults its buffers' pages in
again: one page fault per 4 KiB, most of a fetch's CPU time. Raising both
thresholds keeps freed buffers in the process for the next fetch, as a JVM
keeps its heap. Only glibc has ``mallopt``; elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX): buffers above it
# are still mapped and unmapped one by one.
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
# Free memory at the top of a heap the process keeps rather than hands back: fetch buffers of
# several requests in flight.
DEFAULT_RETAINED_BYTES = 128 * 1024 * 1024


def retain_freed_buffers(retained_bytes: int = DEFAULT_RETAINED_BYTES) -> bool:
    """Have glibc keep freed buffers below ``MMAP_THRESHOLD_MAX`` for reuse, up to ``retained_bytes``
    of free memory per heap; False where the C library has no ``mallopt`` or refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, retained_bytes))
    if not done:
        log.debug("the C library did not take mallopt(M_MMAP_THRESHOLD, M_TRIM_THRESHOLD): fetch buffers are "
                  "mapped afresh")
    return done
