"""What names a recording and its segments (docs/operations/recording.md): shared by the writer on the HTTP
edge (`extender/recording.py`) and the readers of `rulesched replay` (`tools/recording_read.py`), which
stand on no part of the edge.
"""

from __future__ import annotations

import re

FORMAT = "rulesched-recording"
VERSION = 1
"""The recording format version this rulesched writes (and the newest it reads)."""
SEGMENT = re.compile(r"segment-(\d{6,})\.jsonl(\.gz)?$")
"""A segment's file name, with its number."""
