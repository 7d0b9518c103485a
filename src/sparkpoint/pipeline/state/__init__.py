"""Where a subtask's keyed state lives: the backend setting, memory and RocksDB beside it."""
