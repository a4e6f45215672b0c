r"""Saving and loading fitted estimators as netCDF, without pickle.

``calibprob._core.estimator.BaseEstimator.save`` writes an estimator — its
constructor parameters and what it learned — to a netCDF-4 (HDF5) file through
``h5netcdf``; :func:`load` restores it. The file is an ``xarray.DataTree``
that any netCDF tool can read (``xarray.open_datatree(path)``, ``ncdump -h``).

Layout (format 1)
-----------------
* root attrs: ``calibprob_format`` (``"1.0"``), ``calibprob_class`` (the class
  name), ``calibprob_version`` (the package version that wrote it);
* ``/params``: the constructor parameters (:meth:`get_params`);
* ``/state``: the fitted attributes — public names ending in ``_`` and the
  private state that prediction needs. Caches and compiled PyTensor functions
  are not written; they are rebuilt on first use after loading.

Inside ``params`` and ``state`` every value is a node whose attribute
``calibprob_type`` says what it is: a variable for a leaf (``ndarray``,
``int``, ``float``, ``bool``, ``str``, ``none``, homogeneous ``list`` /
``tuple`` of scalars, ``bigint``, ``external``, ``ref``), a group for a
container (``dict``, ``list``, ``tuple``, ``estimator`` — a nested calibprob
estimator with its own ``params`` and ``state`` —, ``object`` — a calibprob
helper such as a conformal score —, ``generator``, ``dataset``,
``dataarray``, ``datatree``, ``randomstate``). Dict keys are kept in ``calibprob_key``.
xarray values are stored as themselves; their attributes are written as they
are when netCDF can hold them exactly (strings, numbers) and otherwise as one
JSON string ``calibprob_attrs_json``.

Security
--------
Loading never executes code from the file. There is no pickle anywhere:
:func:`load` checks the HDF5 signature before opening, refuses raw-bytes
variables or attributes (where a pickle would hide), reads only the type
tags above, parses JSON (which cannot run code), and looks classes up by name
in :data:`REGISTRY`, a fixed table of calibprob's own classes — a name that is
not in it is refused, and nothing named in the file is ever imported.

User code
---------
A user's callable (``CallableRegressor(fit_predict=f)``, a callable
``estimator=``) or a non-calibprob model object cannot be saved without
pickle. Its place is written as an ``external`` node (with its name, for the
message), everything fitted around it is saved, and :func:`load` asks for it
back by parameter name: ``calibprob.load(path, fit_predict=f)``.
"""

from __future__ import annotations

from calibprob._core.persistence.format import FORMAT_VERSION, HDF5_SIGNATURE, REGISTRY
from calibprob._core.persistence.reader import load
from calibprob._core.persistence.writer import save

__all__ = ["save", "load", "FORMAT_VERSION", "HDF5_SIGNATURE", "REGISTRY"]
