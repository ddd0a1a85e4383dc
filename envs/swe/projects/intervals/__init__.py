"""Interval helpers: half-open intervals, merging, interval arithmetic, scheduling and bucketing."""
