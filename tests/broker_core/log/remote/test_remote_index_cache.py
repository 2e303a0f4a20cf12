"""The remote segments' index cache on local disk: bounded in bytes, least recently used evicted first, kept
across restarts."""

from __future__ import annotations

import os

from broker_core.log.remote.remote_index_cache import RemoteIndexCache


def loader(data: bytes, calls: list[str], name: str):
    def load() -> bytes:
        calls.append(name)
        return data
    return load


def test_a_full_cache_evicts_the_least_recently_used_index(tmp_path):
    cache = RemoteIndexCache(str(tmp_path / "cache"), 250)
    calls: list[str] = []
    for name in ("a", "b"):
        assert cache.get(name, loader(name.encode() * 100, calls, name)) == name.encode() * 100
    cache.get("a", loader(b"", calls, "a"))  # a hit: "a" is now the most recently used
    cache.get("c", loader(b"c" * 100, calls, "c"))
    assert calls == ["a", "b", "c"]
    assert sorted(os.listdir(tmp_path / "cache")) == ["a", "c"]
    assert cache.size_in_bytes == 200


def test_an_index_larger_than_the_whole_cache_is_served_but_not_kept(tmp_path):
    cache = RemoteIndexCache(str(tmp_path / "cache"), 50)
    calls: list[str] = []
    assert cache.get("big", loader(b"x" * 51, calls, "big")) == b"x" * 51
    assert cache.get("big", loader(b"x" * 51, calls, "big")) == b"x" * 51
    assert calls == ["big", "big"] and os.listdir(tmp_path / "cache") == []


def test_a_cache_opened_again_keeps_its_files_within_its_new_bound(tmp_path):
    directory = str(tmp_path / "cache")
    cache = RemoteIndexCache(directory, 1000)
    calls: list[str] = []
    for i, name in enumerate(("a", "b", "c")):
        cache.get(name, loader(b"i" * 100, calls, name))
        os.utime(os.path.join(directory, name), (1_000_000 + i, 1_000_000 + i))
    reopened = RemoteIndexCache(directory, 150)
    assert sorted(os.listdir(directory)) == ["c"] and reopened.size_in_bytes == 100
    assert reopened.get("c", loader(b"", calls, "c")) == b"i" * 100 and calls == ["a", "b", "c"]
