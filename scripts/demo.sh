#!/usr/bin/env bash
# Runs the sparkpoint demo on this machine: installs what it needs, then `sparkpoint demo`.
source "$(dirname "$0")/bootstrap.sh"
sync_venv  # the same environment the tests use: running one never reinstalls for the other
case " $* " in *rabbitmq*|*postgres*) install_connector_servers ;; esac
exec .venv/bin/sparkpoint demo "$@"
