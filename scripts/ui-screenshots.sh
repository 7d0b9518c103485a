#!/usr/bin/env bash
# Runs the UI's browser tests and keeps their screenshots in docs/img (the README shows one).
source "$(dirname "$0")/bootstrap.sh"
sync_venv
install_chromium
SPARKPOINT_UI_SCREENSHOTS="$ROOT/docs/img" exec .venv/bin/python -m pytest tests/ui/test_pages.py tests/ui/test_checkpoint_sizes.py -q "$@"
