"""Session-wide test isolation."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from fimble.paths import cache_root

# Engines loaded in-process keep their saved KV states in a directory of this run, never in the
# user's cache: a state left by an earlier run would change how many tokens a test sees evaluated.
# Removed when the run ends: each run left one behind (91 in /tmp after a day of runs here).
if "FIMBLE_KV_STATE_DIR" not in os.environ:
    _states = tempfile.mkdtemp(prefix="fimble-kvstate-")
    os.environ["FIMBLE_KV_STATE_DIR"] = _states
    atexit.register(shutil.rmtree, _states, ignore_errors=True)
# The CPU path (``fimble.models.cpu_path``) is the machine's, not a test's: every model loads on the
# path the user's fimble remembers for this machine, also in servers that tests start with an empty
# FIMBLE_HOME of their own, so outputs do not hang on a fresh probe's timing and no test probes again.
os.environ.setdefault("FIMBLE_CPU_PATH_DIR", str(cache_root() / "cpu-path"))
