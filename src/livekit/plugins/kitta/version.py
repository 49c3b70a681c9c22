from __future__ import annotations

from ttsbridge import __version__ as _ttsbridge_version

__version__ = _ttsbridge_version
