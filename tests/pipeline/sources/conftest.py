"""The brokers the connector sources read from, and Spark."""

from tests.pipeline.conftest import spark
from tests.support.connector_servers import kafka, postgres, rabbitmq

__all__ = ["kafka", "postgres", "rabbitmq", "spark"]
