"""Data for calibprob: bundled real data sets, CSV loading, splits, synthetic test functions.

Every loader returns one layout, an ``xarray.Dataset`` with ``X(obs, feature)``
and ``y(obs)``:

- :func:`load_dataset` — the bundled UCI-style sets used in the papers' tables
  (boston, auto_mpg, concrete, diabetes, wine_quality_red); :func:`list_datasets`
  tabulates them. Provenance: ``calibprob/datasets/data/PROVENANCE.md``.
- :func:`load_csv` — any CSV file with a named target column.
- :func:`make_synthetic` — noisy evaluations of a test function
  (:func:`get_function`, :func:`list_functions`) on a random design
  (:func:`sample_design`).
- :func:`train_calibrate_test_split` and :class:`Standardizer` (fitted on the
  training part only) prepare a task.
"""

from calibprob.datasets.functions import (
    TestFunction,
    available_functions,
    get_function,
    list_functions,
    make_synthetic,
    sample_design,
)
from calibprob.datasets.loaders import available_datasets, list_datasets, load_csv, load_dataset
from calibprob.datasets.splits import Standardizer, train_calibrate_test_split

__all__ = [
    "load_dataset",
    "load_csv",
    "list_datasets",
    "available_datasets",
    "train_calibrate_test_split",
    "Standardizer",
    "TestFunction",
    "get_function",
    "available_functions",
    "list_functions",
    "sample_design",
    "make_synthetic",
]
