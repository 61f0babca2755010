"""The reference pipelines live at the repository root (a team's repo layout, not part of the
installed package): put the root on sys.path. kfp-local hands this process's sys.path to its
step subprocesses, so they import `reference_pipelines` too.

Not on PYTHONPATH: that would leak into every subprocess of the session and make the root's
`core/` folder importable as a top-level `core`, which the packaging test rightly refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
