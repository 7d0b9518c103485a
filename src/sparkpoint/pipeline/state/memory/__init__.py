"""The memory backend: keyed state in the executor's memory, rebuilt from checkpoints each epoch."""
