"""The `sparkpoint` command: one click module per command group, and what only they use."""
