"""CLI verbs, one module each; ``fimble.cli`` adds every command listed here.

Command modules import heavy libraries (llama_cpp, tree_sitter, lmdb) inside the command
functions so that ``fimble --help`` stays instant.
"""

from __future__ import annotations

from fimble.commands.batch import batch
from fimble.commands.complete import complete
from fimble.commands.doctor import doctor
from fimble.commands.eval import eval_command
from fimble.commands.explain import explain
from fimble.commands.index import index
from fimble.commands.models import models
from fimble.commands.serve import serve

__all__ = ["COMMANDS"]

COMMANDS = [models, doctor, complete, explain, batch, eval_command, index, serve]
