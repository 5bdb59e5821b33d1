"""Per-worker caches: bounded, and keyed by what their values are built from."""

from __future__ import annotations

from dagger.processors.external.base import response_cache
from dagger.worker_cache import AnswerCache, BuiltCache, content_key


def test_built_values_are_kept_by_content_and_the_least_recently_used_is_released():
    released = []
    cache = BuiltCache(2, on_evict=released.append)
    built = []

    def build(value):  # noqa: ANN001, ANN202
        built.append(value)
        return value

    assert cache.get(content_key("a", b"x".hex()), lambda: build("A")) == "A"
    assert cache.get(content_key("b"), lambda: build("B")) == "B"
    assert cache.get(content_key("a", b"x".hex()), lambda: build("A again")) == "A"  # same content: reused
    assert cache.get(content_key("c"), lambda: build("C")) == "C"  # over the bound: B, least recently used, goes
    assert built == ["A", "B", "C"] and released == ["B"] and len(cache) == 2


def test_answers_expire_and_expired_ones_are_forgotten_as_new_ones_arrive():
    clock = [0.0]
    cache = AnswerCache(ttl_seconds=10, max_entries=1000, clock=lambda: clock[0])
    for i in range(100):
        cache.put(f"k{i}", i)
    assert cache.get("k5") == 5
    clock[0] = 10.5  # every answer so far has expired
    assert cache.get("k5") is None
    cache.put("fresh", 1)
    assert len(cache) == 1  # the expired 99 are gone, not kept until someone asks for them
    for i in range(5000):  # a bound on distinct keys within one time to live too
        cache.put(i, i)
    assert len(cache) == 1000 and cache.get(4999) == 4999 and cache.get(0) is None


def test_two_jobs_sources_of_the_same_label_do_not_share_answers():
    """Two jobs in one reused worker, each with an HTTP.0: answers were cached by label and shared."""
    mine = {"name": "HTTP.0", "endpoint": "http://a/customers/%s", "cache_ttl_seconds": 60}
    theirs = {**mine, "endpoint": "http://b/drivers/%s"}
    cache = response_cache(mine)
    cache.put(("c1",), {"name": "customer one"})
    assert response_cache(theirs).get(("c1",)) is None
    assert response_cache(dict(mine)) is cache  # the same source (any worker task) finds its answers
    assert response_cache({**mine, "cache_ttl_seconds": 0}) is None
