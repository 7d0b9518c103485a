"""`sparkpoint demo`: coordinator replicas, a stateful PySpark pipeline and the faults to
watch it survive, on one machine."""
