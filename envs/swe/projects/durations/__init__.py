"""Dates, clock times and durations without the standard library's datetime: parse, format, count, shift."""
