"""Example jobs (the demo's and the benchmarks'), written against the public names of
``sparkpoint.pipeline`` only, as a user writes a pipeline."""
