"""Per-language facts the evaluation needs (``crossfile.toml``), kept as data beside the code."""
