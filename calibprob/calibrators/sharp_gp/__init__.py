r"""Sharp calibrated Gaussian processes (Capone, Hirche & Pleiss 2023).

The base GP (hyperparameters :math:`\theta^R`, fitted on the training data)
keeps its posterior mean :math:`\mu(\theta^R, x)`; its posterior standard
deviation is replaced, separately for every quantile level :math:`\delta`, by
:math:`\beta_\delta\,\sigma(\theta_\delta, x)`: the posterior standard
deviation of the *same* training data under new *calibration
hyperparameters* :math:`\theta_\delta`, times a scale :math:`\beta_\delta`.

Single level (paper §5.1)
-------------------------
With calibration residuals :math:`r_i = y_i - \mu(\theta^R, x_i)`,
:math:`i = 1..N`, and z-scores :math:`z_i(\theta) = r_i / \sigma(\theta, x_i)`,
:math:`\beta_\delta` is the empirical quantile of the z-scores with the
:math:`N + 1` convention, eq. (6),

.. math::

    \beta_\delta(\theta) = q_{\mathrm{lin}}(\delta, z(\theta)) =
    z_{(l)} + (\delta(N+1) - l)\,(z_{(l+1)} - z_{(l)}),\qquad
    l = \lfloor \delta (N+1) \rfloor,

(:math:`z_{(j)}` the :math:`j`-th smallest; :math:`\delta = j/(N+1)` maps to
:math:`z_{(j)}`, so a level :math:`\delta` needs
:math:`1/(N+1) \le \delta \le N/(N+1)`), and :math:`\theta_\delta` minimises the
sharpness objective (7),

.. math::

    \min_\theta\; \sum_{i=1}^{N} \bigl[\beta_\delta(\theta)\,\sigma(\theta, x_i)\bigr]^2 ,

the squared distance of the calibrated quantile from the mean. ``calibprob``
writes this as a PyMC model (:func:`build_model`): the free variable is the
log-hyperparameter vector, the objective is a ``pm.Potential``
(``-N · mean((βσ)²) / mean(r²)``, scaled by the residual variance so that the
weak ``Normal(log θ^R, prior_sd)`` prior on each free log-hyperparameter,
a second potential, means the same thing on every data scale), and the MAP is
found by L-BFGS-B on the compiled log-probability and its gradient (through
the sort of the empirical quantile). The training and calibration inputs, the
residuals, the level, the previous level's hyperparameters and the switches
are ``pm.Data``: one compiled function serves every level, restart, data set
and input dimension.

Hyperparameters are handled in "σ-increasing" log coordinates
:math:`\phi = (-\log\ell_1, \dots, -\log\ell_d, \log\sigma_f^2, \log\sigma_n^2)`:
the posterior variance grows with every entry (Assumption 4.1 of the paper:
shorter lengthscales, larger signal or noise variance ⇒ larger
:math:`\sigma`). By default the lengthscales and the signal variance are
free and the noise variance stays at the base's value (``fit_noise=True``
frees it too). Note that the objective is invariant to a common scaling of
signal and noise variance (β absorbs it): only their ratio matters.

All levels (paper §5.2, Algorithm 1, Remark 5.3)
-------------------------------------------------
For the quantiles :math:`\mu + \beta_\delta\sigma(\theta_\delta, \cdot)` not to
cross, :math:`\beta_\delta` must be non-decreasing in :math:`\delta` and
:math:`\phi_\delta` non-increasing while :math:`\beta < 0`, non-decreasing once
:math:`\beta > 0`. The sign of :math:`\beta` at a level is fixed by the data
(:math:`\sigma > 0`): with :math:`j_0` negative residuals, levels
:math:`\delta \le j_0/(N+1)` have :math:`\beta \le 0` and levels
:math:`\delta \ge (j_0+1)/(N+1)` have :math:`\beta > 0`. Levels are therefore
solved in two passes, each *from the tail toward the median*: the outermost
level of a pass freely (with restarts), every further one warm-started from
and constrained by its outer neighbour through the substitution of
Remark 5.3, :math:`\phi_{\text{next}} = \phi_{\text{prev}} - \exp(\Delta)`
(free variable :math:`\Delta`, entry-wise), which makes :math:`\phi` shrink
toward the median. Equation (7) does not enforce that :math:`|\beta|` shrinks
too; when a solution violates it, :math:`\phi` is moved back along the segment
to :math:`\phi_{\text{prev}}` (where the order statistic is guaranteed to be
smaller) until it holds, and the knot is flagged ``backtracked``. Levels
strictly between :math:`j_0/(N+1)` and :math:`(j_0+1)/(N+1)` (where β changes
sign) are not fitted; the interpolant covers them.

Interpolation: :math:`\hat\beta(\delta)` and :math:`\hat\phi(\delta)` are
piecewise linear in :math:`\Phi^{-1}(\delta)` through the knots plus one
artificial knot at the zero of :math:`\hat\beta`, where :math:`\hat\phi` takes
the entry-wise minimum of its neighbours (the minimum the paper asks for). The
paper interpolates linearly in :math:`\delta` but allows any monotone
interpolant (Remark 5.2, §5.2); linear in :math:`\Phi^{-1}(\delta)` is exact
for β when the z-scores are Gaussian, does not inflate the tails between
sparse knots, and is the interpolation rule of the predictive contract. By
default the knots are ``n_levels`` ranks :math:`j/(N+1)` spread evenly in
:math:`\Phi^{-1}` (:func:`knot_levels`). Beyond the outermost knots
:math:`\hat\phi` is held constant and :math:`\hat\beta` continues with the
slope of the outer segment (the Gaussian tail rule of
:mod:`calibprob.predictive`), so the quantile function is defined, finite and
non-crossing for every :math:`\delta \in (0, 1)`.

Guarantee (Theorem 5.4)
-----------------------
With knots at :math:`\delta_j = j/(N+1)`, the held-out probability
:math:`P(y \le \mu(x) + \hat\beta(\delta)\sigma(\hat\theta(\delta), x))` lies
in :math:`[\delta - 1/(N+1), \delta + 1/(N+1)]` for every :math:`\delta` —
*if* the score function did not depend on the calibration data. The paper's
variant chooses :math:`\theta_\delta` on the same calibration points that set
:math:`\beta_\delta`, which can over-fit a small calibration set.

Variants
--------
``variant="full"``
    The paper's method as above.
``variant="scaled"``
    The cheap alternative of the paper's §6: :math:`\theta_\delta` is the base's
    :math:`\theta^R` with every lengthscale divided by one factor
    :math:`s_\delta` (:math:`\phi = \phi^R + \log s_\delta` on the
    lengthscale entries), found by a bounded line search per level (NumPy, no
    compiled graph), with the same passes and monotonicity constraints.
``variant="cross-fitted"``
    Beyond the paper: the calibration set is split at random;
    :math:`\hat\theta(\cdot)` is fitted by the full method on a fraction
    ``fit_fraction`` of it, and :math:`\beta_\delta` is the :math:`q_{\mathrm{lin}}`
    of the z-scores of the *other* points only. The score function then does
    not depend on the points that set :math:`\beta`, and each knot
    :math:`\delta_j = j/(N_B+1)` has exact split-conformal coverage
    :math:`P(y \le Q(\delta_j)) = \delta_j` (continuous data). Should the
    recomputed β not shrink toward the median, the inner knot's :math:`\phi`
    is moved toward its outer neighbour's, as Algorithm 1's backtracking does,
    and β recomputed there (:func:`exact_monotone_knots`): every knot keeps
    its exact order statistic (see "Knots after β is recomputed" below).

Knots after β is recomputed
---------------------------
Whenever θ is fitted on other points than those that set β (the cross-fitted
split, ``n_cal_subset``, ``n_train_subset``), the recomputed
:math:`\beta_j = q_{\mathrm{lin}}(\delta_j, r/\sigma(\phi_j))` need not be
monotone. Theorem 5.4 rests on Lemma 8.1 (Marx et al. 2022, Theorem 1), which
needs both monotone curves and, at each knot :math:`\delta_j = j/(N+1)`, the
:math:`j`-th order statistic of the scores: exactly :math:`j` of the :math:`N`
points at or below :math:`Q(\delta_j)`. Widening β at the offending knot
(a running maximum outward) would keep the first and lose the second: the
moved knot's calibration coverage falls to :math:`c_j < j` of :math:`N` below
the median (above it, more than :math:`j`), so only the conservative side
:math:`P(y \le Q(\delta_j)) \le \delta_j + 1/(N+1)` of the guarantee
would survive there (measured: 16 of 200 points at the knot 20/201). The repair
moves the inner knot's :math:`\phi` back toward its outer neighbour's instead,
at fractions 1/2, 1/4, 1/8, 0, and recomputes β exactly; at 0 the two knots
share :math:`\sigma`, so their β are ordered order statistics of the same
z-scores. Both conditions then hold at every knot and Theorem 5.4 applies as
in the paper's variant (``diagnostics_["repaired"]`` flags such knots with 4).
:func:`monotone_knots`' widening remains for rounding (a violation within
:math:`10^{-10}|\beta|`, the solver's tolerance) and for a φ that is not
monotone on input.

Large data (paper §6): ``n_train_subset`` fits :math:`\theta_\delta` with the
posterior conditioned on a random subset of the training data (O(n³) per
evaluation on the subset only), then recomputes :math:`\beta_\delta` with the
posterior on *all* training data (with the same exact monotone repair), which
keeps the calibration guarantee. With a
:class:`calibprob.bases.gp.SparseGaussianProcessRegressor` base the same graph is
built on its VFE predictive variance (inducing inputs fixed).

Large calibration sets: every objective evaluation of the full variant costs
O(n² N) (one Cholesky factor of the n training points and one triangular solve
with the N calibration columns; the gradient as much again), so
``n_cal_subset`` (default 1000) fits :math:`\theta_\delta` on a seeded subset
of the calibration rows, at the knot levels clipped into its range, and
recomputes :math:`\beta_\delta` on all of them (as the cross-fitted variant
does with its other part), which keeps the calibration-set coverage at the
knots exact. Prediction costs one posterior factorisation per distinct level;
``interpolate="quantile"`` computes σ only at the interpolation nodes and
interpolates the quantile itself (linear in :math:`\Phi^{-1}(\delta)`)
between them — the same quantiles at the nodes, monotone in δ (Remark 5.2).
Above 1000 calibration rows the defaults switch to that interpolation, one
L-BFGS-B start, knots warm-started from their outer neighbour's decrements and
at most 6 line-search steps per iteration (the order statistic β puts kinks in
the objective, where Wolfe line searches waste evaluations); at or below 1000
rows they are Algorithm 1 as in the paper, unchanged.
The measured trade-offs are on the documentation page of the method.

References
----------
Capone, A., Hirche, S. and Pleiss, G. (2023). Sharp calibrated Gaussian
processes. NeurIPS 36. §5 (eq. 5–7, Algorithm 1, Remark 5.3, Theorem 5.4),
§6 (scaled hyperparameters, subsets, sparse GPs), appendix eq. (18) (UCB).
Marx, C., Zhao, S., Neiswanger, W. and Ermon, S. (2022). Modular conformal
calibration. ICML (Theorem 1, the N + 1 convention).
Titsias, M. (2009). Variational learning of inducing variables in sparse
Gaussian processes. AISTATS.

Package layout
--------------
``_knots``
    NumPy knot numerics: :func:`q_lin`, :func:`exact_monotone_knots`, :func:`monotone_knots`,
    :func:`interpolate_knots`, the σ-increasing coordinates.
``_op``
    The exact-GP posterior variance as a PyTensor Op with an analytic pullback.
``_graph``
    :func:`build_model` (the PyMC model of one level) and its compiled-function cache.
``_solver``
    Algorithm 1: the L-BFGS-B solver per level, the one-factor line search, the passes.
``_diagnostics``
    The per-knot ``diagnostics_`` Dataset.
``_validate``
    The estimator's input checks, :data:`VARIANTS`, :data:`INTERPOLATIONS`.
``estimator``
    :class:`SharpCalibratedGP` and :func:`sharp_gp_ucb`.
"""

from calibprob.calibrators.sharp_gp._graph import build_model, clear_cache
from calibprob.calibrators.sharp_gp._knots import (
    exact_monotone_knots,
    interpolate_knots,
    interpolate_quantiles,
    knot_levels,
    monotone_knots,
    q_lin,
    required_calibration_points,
)
from calibprob.calibrators.sharp_gp._validate import INTERPOLATIONS, VARIANTS
from calibprob.calibrators.sharp_gp.estimator import SharpCalibratedGP, sharp_gp_ucb

# the public home of the estimator (the save/load registry, pickles and the API docs name it)
SharpCalibratedGP.__module__ = __name__
sharp_gp_ucb.__module__ = __name__

__all__ = [
    # NumPy layer
    "q_lin",
    "knot_levels",
    "required_calibration_points",
    "exact_monotone_knots",
    "monotone_knots",
    "interpolate_knots",
    "interpolate_quantiles",
    # PyMC model
    "build_model",
    "clear_cache",
    # estimator and helpers
    "SharpCalibratedGP",
    "sharp_gp_ucb",
    "VARIANTS",
    "INTERPOLATIONS",
]
