"""The one definition of calibprob's version (pyproject.toml reads it; so do the docs)."""

__version__ = "0.2.0"
