"""Session-wide test isolation."""

from __future__ import annotations

import os
import tempfile

# Engines loaded in-process keep their saved KV states in a directory of this run, never in the
# user's cache: a state left by an earlier run would change how many tokens a test sees evaluated.
os.environ.setdefault("FIMBLE_KV_STATE_DIR", tempfile.mkdtemp(prefix="fimble-kvstate-"))
# One CPU-path verdict per model for the whole run (``fimble.models.cpu_path``), never the user's:
# servers that tests start with an empty FIMBLE_HOME of their own inherit it and probe no more.
os.environ.setdefault("FIMBLE_CPU_PATH_DIR", tempfile.mkdtemp(prefix="fimble-cpu-path-"))
