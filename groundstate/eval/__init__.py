"""Benchmarks, metrics, the durable runner, statistics and reports."""
