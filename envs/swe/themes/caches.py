"""The containers family: tests for the LRU cache, heap, priority queue, ring buffer and TTL cache."""
from __future__ import annotations

import random

from jointrl.envs.swe.case import Case, call, script
from jointrl.envs.swe.family import Family, Module

KEYS = ("a", "b", "c", "d", "e", "f")


def lru_cases(rng: random.Random) -> list[Case]:
    capacity = rng.randint(2, 3)
    keys = rng.sample(KEYS, capacity + 1)
    filled = [f"cache = LRUCache({capacity})"] + [f"cache.put({k!r}, {i})" for i, k in enumerate(keys[:capacity])]
    return [
        script("keys", filled, "cache.keys()"),
        script("keys", filled + [f"cache.get({keys[0]!r})"], "cache.keys()"),
        script("evict", filled + [f"cache.put({keys[-1]!r}, 9)"], "[cache.keys(), cache.evicted]"),
        script("evict", filled + [f"cache.get({keys[0]!r})", f"cache.put({keys[-1]!r}, 9)"], "cache.evicted"),
        script("put", filled + [f"cache.put({keys[0]!r}, 42)"], f"[cache.get({keys[0]!r}), len(cache.values), cache.evicted]"),
        script("get", filled, f"cache.get({keys[-1]!r}, 'missing')"),
        script("hit_rate", filled + [f"cache.get({keys[0]!r})", "cache.get('zz')", f"cache.get({keys[1]!r})"], "cache.hit_rate()"),
        script("hit_rate", filled, "cache.hit_rate()"),
        script("rejects", [], "LRUCache(0)", raises="ValueError"),
        script("single", ["cache = LRUCache(1)", "cache.put('x', 1)", "cache.put('y', 2)"], "[cache.get('x'), cache.get('y')]"),
    ]


def heap_cases(rng: random.Random) -> list[Case]:
    items = [rng.randint(0, 50) for _ in range(rng.randint(7, 10))]
    return [
        script("push", ["heap = []"] + [f"push(heap, {x})" for x in items], "[is_heap(heap), heap[0]]"),
        script("pop", [f"heap = heapify({items!r})"], f"[pop(heap) for _ in range({len(items)})]"),
        script("pop", ["heap = [4]"], "[pop(heap), heap]"),
        script("pop_rejects", ["heap = []"], "pop(heap)", raises="IndexError"),
        call("heapify", [5, 3, 8, 1]),
        call("is_heap", [1, 3, 2, 7]),
        call("is_heap", [2, 1]),
        call("nsmallest", items, rng.randint(2, 4)),
        call("nsmallest", items[:3], 5),
        script("mixed", ["heap = []", "push(heap, 5)", "push(heap, 1)", "push(heap, 3)", "first = pop(heap)", "push(heap, 0)"],
               "[first, pop(heap), pop(heap), heap]"),
    ]


def priority_cases(rng: random.Random) -> list[Case]:
    jobs = [(f"job{i}", rng.randint(0, 3)) for i in range(6)]
    queued = ["queue = PriorityQueue()"] + [f"queue.push({name!r}, priority={p})" for name, p in jobs]
    return [
        script("drain", queued, "queue.drain()"),
        script("drain", queued, "queue.drain(limit=2)"),
        script("drain", queued, "queue.drain(limit=99)"),
        script("pop", queued, "[queue.pop(), len(queue)]"),
        script("peek", queued, "[queue.peek(), len(queue)]"),
        script("peek", ["queue = PriorityQueue()"], "queue.peek()"),
        script("pop_rejects", ["queue = PriorityQueue()"], "queue.pop()", raises="IndexError"),
        script("ties", ["queue = PriorityQueue()", "queue.push('first', 1)", "queue.push('second', 1)", "queue.push('urgent', 0)"],
               "queue.drain()"),
        script("default", ["queue = PriorityQueue()", "queue.push('late', 2)", "queue.push('plain')"], "queue.drain()"),
    ]


def ring_cases(rng: random.Random) -> list[Case]:
    capacity = rng.randint(3, 5)
    values = [rng.randint(1, 20) for _ in range(capacity + rng.randint(1, 4))]
    filled = [f"ring = RingBuffer({capacity})"] + [f"ring.append({v})" for v in values]
    partial = [f"ring = RingBuffer({capacity})"] + [f"ring.append({v})" for v in values[: capacity - 1]]
    return [
        script("items", filled, "ring.items()"),
        script("items", partial, "ring.items()"),
        script("is_full", partial, "ring.is_full()"),
        script("is_full", partial + ["ring.append(0)"], "ring.is_full()"),
        script("latest", filled, f"ring.latest({rng.randint(2, capacity)})"),
        script("latest", partial, "ring.latest()"),
        script("latest", partial, f"ring.latest({capacity + 3})"),
        script("mean", filled, "ring.mean()"),
        script("mean", [f"ring = RingBuffer({capacity})"], "ring.mean()"),
        script("rejects", [], "RingBuffer(0)", raises="ValueError"),
    ]


def ttl_cases(rng: random.Random) -> list[Case]:
    ttl = rng.randint(5, 30)
    t0 = rng.randint(0, 100)
    stored = [f"cache = TTLCache({ttl})", f"cache.set('a', 1, {t0})", f"cache.set('b', 2, {t0 + 3})"]
    return [
        script("get", stored, f"cache.get('a', {t0 + ttl - 1})"),
        script("get", stored, f"cache.get('a', {t0 + ttl})"),
        script("get", stored, f"cache.get('zz', {t0}, default=-1)"),
        script("purge", stored, f"[cache.purge({t0 + ttl + 1}), sorted(cache.entries)]"),
        script("purge", stored, f"cache.purge({t0})"),
        script("live_keys", stored, f"cache.live_keys({t0 + ttl})"),
        script("live_keys", stored, f"cache.live_keys({t0 + 1})"),
        script("remaining", stored, f"cache.remaining('b', {t0 + 4})"),
        script("remaining", stored, f"cache.remaining('a', {t0 + ttl + 50})"),
        script("reset", stored + [f"cache.set('a', 5, {t0 + ttl})"], f"cache.get('a', {t0 + ttl + 1})"),
        script("rejects", [], "TTLCache(0)", raises="ValueError"),
    ]


FAMILY = Family(
    name="caches",
    topic="the container classes",
    package_names=("cachekit", "containers", "queuekit"),
    modules=(
        Module("lru", lru_cases),
        Module("heap", heap_cases),
        Module("priority", priority_cases),
        Module("ring", ring_cases),
        Module("ttl", ttl_cases),
    ),
)
