"""The one exception the domain model raises."""


class InvalidCheckpointValue(ValueError):
    """A checkpoint value that contradicts itself (a bad id, offsets that miss their range, …)."""
