"""calibprob's internal core: the estimator base class, validation, options, persistence and old-path aliases.

* ``calibprob._core.estimator`` -- ``BaseEstimator`` and the calibrator families;
* :mod:`calibprob._core.validation` -- every input check; ``calibprob._core.options`` -- spec option types;
* :mod:`calibprob._core.persistence` -- save / load as netCDF (format, writer, reader, safety checks);
* small numerical helpers: :mod:`~calibprob._core.stable`, :mod:`~calibprob._core.optim`,
  :mod:`~calibprob._core.ranks`, :mod:`~calibprob._core.pytensor_setup`; the cache warmer
  ``python -m calibprob._core.warm``;
* :mod:`calibprob._core.deprecation` -- old import paths of moved modules.

Nothing here names a base model or a calibrator: persistence finds classes through the registry's table, and
each class declares its own transient state.
"""
