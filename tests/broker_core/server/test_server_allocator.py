import ctypes
import platform
import resource

import pytest

from broker_core.server.allocator import retain_freed_buffers

MIB = 1 << 20


def _faults_of_a_fetch_sized_round(libc) -> int:
    """Minor page faults of filling and freeing four 1 MiB buffers (a fetch of 4 partitions)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffers = [libc.malloc(MIB) for _ in range(4)]
    for buffer in buffers:
        ctypes.memset(buffer, 1, MIB)
    for buffer in buffers:
        libc.free(buffer)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_broker_process_keeps_freed_fetch_buffers_instead_of_faulting_fresh_pages_in():
    assert retain_freed_buffers()
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, (ctypes.c_size_t,), (
        ctypes.c_void_p,)
    _faults_of_a_fetch_sized_round(libc)
    # The next fetch reuses the pages: without retaining, each round faults its ~1,024 pages in again.
    assert _faults_of_a_fetch_sized_round(libc) < 64
