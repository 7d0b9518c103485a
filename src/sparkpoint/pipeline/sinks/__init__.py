"""Where outputs go, committed with checkpoints: the sink base, files, Kafka, PostgreSQL, routed."""
