"""`python -m sparkpoint` is the `sparkpoint` command; this file is also spark-submit's
main file for a pipeline (`spark-submit …/sparkpoint/__main__.py run my_pipeline:pipeline`,
docs/production.md)."""

import sys
from pathlib import Path

# Run as a file, Python puts this package's own directory first on the path, where its
# subpackages (config, client, storage, …) would shadow top-level modules of those names.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

from sparkpoint.ops.cli.main import main

main(prog_name="sparkpoint")
