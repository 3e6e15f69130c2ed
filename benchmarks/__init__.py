"""Benchmarks, run by `make bench` (never by the test suite: timings are not assertions)."""
