"""Benchmark loaders, builders and generators."""
