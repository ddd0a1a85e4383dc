"""Containers: an LRU cache, a binary heap, a stable priority queue, a ring buffer and a TTL cache."""
