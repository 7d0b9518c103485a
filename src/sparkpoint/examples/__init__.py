"""Example jobs (the demo's and the benchmarks')."""
