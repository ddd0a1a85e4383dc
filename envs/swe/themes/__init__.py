"""Seeded test-case generators, one module per family (the reference code is under ../projects/)."""
