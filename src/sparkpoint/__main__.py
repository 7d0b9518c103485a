"""`python -m sparkpoint` is the `sparkpoint` command."""

from sparkpoint.ops.cli.main import main

main()
