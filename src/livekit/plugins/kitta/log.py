from __future__ import annotations

import logging

logger = logging.getLogger("livekit.plugins.kitta")
