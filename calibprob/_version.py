"""The installed package's version, in a module of its own so that any layer may read it.

(:mod:`calibprob._io` writes it into every saved file; importing it from :mod:`calibprob`
itself would make the save/load layer depend on the package's top, a circle.)
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("calibprob")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
