"""Offline state tools: read a checkpoint's keyed state, write a savepoint, with no job."""
