"""`python -m sparkpoint` is the `sparkpoint` command."""

from sparkpoint.ops.cli import main

main()
