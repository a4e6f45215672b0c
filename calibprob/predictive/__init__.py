r"""The one data contract: predictive distributions as xarray Datasets.

Every predictor and calibrator in calibprob returns the same object, an
``xr.Dataset`` with

* dimension ``obs`` (one entry per input point) and dimension ``level`` (a
  coordinate of quantile levels strictly inside (0, 1), strictly increasing);
* variable ``quantile(obs, level)``: the predictive quantile function sampled
  at those levels, non-decreasing in ``level`` for every ``obs``;
* optionally ``mean(obs)`` and ``std(obs)``; for the Gaussian family also
  ``loc(obs)`` and ``scale(obs)`` with ``attrs["family"] == "normal"``, in
  which case every evaluation is exact;
* attributes ``method`` (who made it), ``family`` (``"normal"`` or
  ``"quantile"``) and ``tail`` (the tail rule, below).

Interpolation rule ("piecewise-Gaussian")
-----------------------------------------
Between two stored levels :math:`p_k < p_{k+1}` the quantile function is
linear in the standard-normal score :math:`z = \Phi^{-1}(p)`:

.. math::

    Q(p) = q_k + s_k\,\bigl(\Phi^{-1}(p) - z_k\bigr), \qquad
    s_k = \frac{q_{k+1} - q_k}{z_{k+1} - z_k} \ge 0 .

It is monotone whenever the stored quantiles are, it is *exact* for every
Gaussian (whose quantile function is linear in :math:`z`), and its CDF and
density have closed forms: for :math:`y` in segment :math:`k`,
:math:`F(y) = \Phi(z_k + (y - q_k)/s_k)` and
:math:`f(y) = \varphi(z_k + (y-q_k)/s_k)/s_k`. The density is thus the
derivative of the CDF obtained by inverting the quantile function, as the
papers compute NLL for quantile-only methods.

Tail rule ``"normal"``
----------------------
Below the lowest and above the highest stored level the same formula
continues with a Gaussian tail anchored at the extreme quantile. Its scale is
the larger of the outermost segment's slope and the slope of the chord from the
extreme level to the stored level about one unit of :math:`z` inwards (0.01 to
0.09 with the default levels): both are the exact :math:`\sigma` for a Gaussian;
a heavy tail keeps its outermost slope, while one nearly tied outer segment (as
level-by-level calibrators can produce) cannot collapse the tail and send the
log density of an observation just beyond it to minus hundreds. Quantiles at levels 0 and 1 are therefore
infinite, CDF values are strictly inside (0, 1) and the log density is finite
everywhere.

Accuracy
--------
For a Gaussian the representation is exact to floating-point rounding at any
set of levels (tested to 1e-9). For a non-Gaussian distribution the error is
that of a piecewise-linear fit in :math:`z`; ``tests/predictive/test_constructors.py``
states measured bounds for a Student-t(5) and a lognormal with the default 99
levels.

The package
-----------
Three layers, as in arviz-stats (``base/array.py`` -> ``base/dataarray.py`` -> ``accessors.py``):

* the NumPy layer: ``_numerics`` (the piecewise-Gaussian quantile
  function: ``quantile_cdf``, ``quantile_ppf``, ...) and ``_transformed``
  (the back-transformed family);
* the families, with the one per-family dispatch of cdf / logpdf / ppf / moments
  (``_families``: normal, quantile, transformed, interval), read by the
  accessor, the metrics and the calibrators alike;
* the ``calib`` accessor (``_accessor``), a thin xarray wrapper over the families;

beside them the constructors (:func:`normal`, :func:`from_quantiles`, :func:`from_cdf_grid`,
:func:`from_draws`, :func:`from_loo`, :func:`lfo` for time series), :func:`validate`, and the ArviZ bridge
(:func:`to_datatree`, :func:`heldout_elpd`).

The interval family
-------------------
Intervals-only methods (jackknife+, CV+, J+GP, full-conformal GP) return ``lower`` and ``upper``
over ``confidence_level`` (:func:`from_intervals`, ``attrs["family"] == "interval"``).
:func:`validate` accepts it; its quantile function is known only at the interval ends,
:math:`Q((1-c)/2)` and :math:`Q((1+c)/2)` for the stored levels :math:`c`, so ``ppf`` and
``interval`` answer there and nowhere else, while ``cdf``, ``logpdf``, ``zscore``, ``mean``,
``std`` and ``sample`` raise an error naming the family.

Reach
-----
A quantile Dataset may carry ``reach(obs)``: the largest central confidence level each row's
calibration states (Mondrian calibration, one calibration size per group). Beyond it ``ppf``
and ``interval`` give :math:`-\infty`/:math:`+\infty`; the stored quantiles there are finite
placeholders that ``cdf``, ``logpdf``, the moments, the CRPS and the NLL read
(``calibprob.predictive._reach``).
"""

from __future__ import annotations

from calibprob.predictive._accessor import CalibAccessor as CalibAccessor  # registers the `calib` accessor
from calibprob.predictive._arviz import heldout_elpd, to_datatree
from calibprob.predictive._common import DEFAULT_LEVELS, CalibprobWarning
from calibprob.predictive._constructors import from_cdf_grid, from_intervals, from_quantiles, normal
from calibprob.predictive._draws import WEIGHT_SUM_TOL as WEIGHT_SUM_TOL
from calibprob.predictive._draws import from_draws
from calibprob.predictive._families import family_of
from calibprob.predictive._numerics import (
    quantile_cdf,
    quantile_logpdf,
    quantile_moments,
    quantile_pieces,
    quantile_ppf,
    quantile_ppf_zscore,
    quantile_sample,
    quantile_zscore,
)
from calibprob.predictive._reach import REACH_VAR as REACH_VAR
from calibprob.predictive._reach import reach_variable as reach_variable
from calibprob.predictive._validate import is_interval_family as is_interval_family
from calibprob.predictive._validate import validate
from calibprob.predictive.leave_future_out import LFOWeights as LFOWeights
from calibprob.predictive.leave_future_out import lfo, psis_lfo_weights
from calibprob.predictive.loo import LOOWeights as LOOWeights
from calibprob.predictive.loo import from_loo
from calibprob.predictive.loo import loo_weights as loo_weights

__all__ = [
    "DEFAULT_LEVELS",
    "CalibprobWarning",
    "normal",
    "from_quantiles",
    "from_draws",
    "from_cdf_grid",
    "from_intervals",
    "from_loo",
    "lfo",
    "psis_lfo_weights",
    "to_datatree",
    "heldout_elpd",
    "validate",
    "family_of",
    "quantile_cdf",
    "quantile_logpdf",
    "quantile_ppf",
    "quantile_moments",
    "quantile_pieces",
    "quantile_sample",
    "quantile_zscore",
    "quantile_ppf_zscore",
]
