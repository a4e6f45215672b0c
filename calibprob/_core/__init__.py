"""calibprob's internal core: the estimator base class, validation, options, persistence and old-path aliases.

* ``calibprob._core.estimator`` -- ``BaseEstimator`` and the calibrator families;
* ``calibprob._core.validation`` -- every input check; ``calibprob._core.options`` -- spec option types;
* ``calibprob._core.persistence`` -- save / load as netCDF (format, writer, reader, safety checks);
* small numerical helpers: ``calibprob._core.stable``, ``calibprob._core.optim``,
  ``calibprob._core.ranks``, ``calibprob._core.pytensor_setup``; the cache warmer
  ``python -m calibprob._core.warm``;
* ``calibprob._core.deprecation`` -- old import paths of moved modules.

Nothing here names a base model or a calibrator: persistence finds classes through the registry's table, and
each class declares its own transient state.
"""
