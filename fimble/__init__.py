"""fimble: offline code completion for CPU-only laptops."""

__version__ = "0.1.0"

__all__ = ["__version__"]
