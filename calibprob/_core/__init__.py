"""calibprob's internal core: the estimator base class, validation, options, persistence and old-path aliases.

Nothing here names a base model or a calibrator; everything else may import from here, and this package
imports nothing from the rest of calibprob.
"""
