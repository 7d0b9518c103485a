"""sparkpoint: highly available, Flink-grade checkpoints for stateful PySpark pipelines."""

__version__ = "0.1.0"

__all__ = ["__version__"]
