"""calibprob's tests: a package, so test modules of the same name can live in different folders.

Each folder under ``tests/`` mirrors a package of ``calibprob/`` and carries an ``__init__.py``; pytest's default
import mode then imports ``tests/bases/test_linear.py`` as ``tests.bases.test_linear`` with the repository root on
``sys.path``. Shared code lives in :mod:`tests.support` (paths, the saved-file table, the conjugate model), shared
data fixtures in ``tests/conftest.py``: no test imports another test module.
"""
