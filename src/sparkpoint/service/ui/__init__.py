"""The web UI every replica serves at ``/ui/`` and the state behind its pages.

Static pages (plain ES modules and CSS, checked in; uPlot vendored by
``scripts/vendor-ui.sh``) over the read-only ``/v1/ui/…`` endpoints of
:mod:`sparkpoint.service.api.ui_status` (docs/ui.md).
"""

from sparkpoint.service.ui.history import LeadershipHistory, watch_leadership
from sparkpoint.service.ui.retained import RetainedCache
from sparkpoint.service.ui.static_files import STATIC_DIR, mount_static

__all__ = ["STATIC_DIR", "LeadershipHistory", "RetainedCache", "mount_static", "watch_leadership"]
