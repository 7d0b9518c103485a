"""The RocksDB backend: keyed state in a local store that stays on its executor between epochs."""
