"""Local servers for development, tests and the demo: ZooKeeper, HDFS, Kafka, RabbitMQ and
PostgreSQL on free ports under a directory, and the pinned JVM artifacts they run."""
