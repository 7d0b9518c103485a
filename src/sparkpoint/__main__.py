"""`python -m sparkpoint` is the `sparkpoint` command."""

from sparkpoint.cli.main import main

main()
