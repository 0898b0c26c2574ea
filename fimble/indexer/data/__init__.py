"""Data files of the indexer (per-language facts, default skip rules, stop words); no code."""
