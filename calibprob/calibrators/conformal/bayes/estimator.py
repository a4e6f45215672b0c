r"""Conformal Bayes: full-conformal prediction sets from one posterior (Fong and Holmes 2021).

For a test input :math:`x_{n+1}` and a candidate :math:`y`, full conformal prediction adds
:math:`z_{n+1} = (x_{n+1}, y)` to the data and scores every point by its posterior predictive
density under the augmented posterior. Conformal Bayes obtains that posterior from the existing
draws :math:`\theta_1, \dots, \theta_S` by *add-one-in* importance sampling,
:math:`\bar w_s(y) \propto f_{\theta_s}(y \mid x_{n+1})`:

.. math::

    \sigma_i(y) = \sum_s \bar w_s(y)\, f_{\theta_s}(y_i \mid x_i),\qquad
    \sigma_{n+1}(y) = \sum_s \bar w_s(y)\, f_{\theta_s}(y \mid x_{n+1}),

    \pi(y) = \frac{1}{n+1} \sum_{i=1}^{n+1} \mathbf 1[\sigma_i(y) \le \sigma_{n+1}(y)],\qquad
    C_\alpha(x_{n+1}) = \{y : \pi(y) > \alpha\}.

Computed in log space on a grid of candidates, with the test point counted in its own rank and
exact integer order statistics (:math:`\pi(y) > \alpha \iff \text{rank} > \lfloor\alpha(n+1)\rfloor`).
If the :math:`\sigma` were exact, :math:`P(Y_{n+1} \in C_\alpha) \ge 1 - \alpha` for exchangeable
data *whether or not the model is right*; with MCMC draws and importance sampling it holds up to
the Monte Carlo error of the :math:`\sigma`, which the effective sample size and Pareto
:math:`\hat k` of the weights diagnose.

The *grouped* version (partially exchangeable data, hierarchical models; Fong and Holmes 2021,
§3.3) ranks a test point only among the training points of its own group :math:`j`:
:math:`\pi_j(y) = \frac{1}{n_j+1}\sum_{i \in j \cup \{n+1\}} \mathbf 1[\sigma_i \le \sigma_{n+1}]`,
which covers with probability :math:`\ge 1-\alpha` within every group.

Under *covariate shift* (the test inputs drawn from :math:`\tilde P_X`, the law of :math:`Y \mid X`
unchanged) the ranks are weighted by the likelihood ratio :math:`w(x) = d\tilde P_X/dP_X(x)`
(Tibshirani, Barber, Candès and Ramdas 2019, weighted full conformal, their Lemma 3):

.. math::

    \pi_w(y) = \frac{\sum_{i=1}^n w(x_i)\,\mathbf 1[\sigma_i(y) \le \sigma_{n+1}(y)] + w(x_{n+1})}
                    {\sum_{i=1}^n w(x_i) + w(x_{n+1})},\qquad
    C_\alpha(x_{n+1}) = \{y : \pi_w(y) > \alpha\}.

The conformity scores :math:`\sigma_i(y)` are the add-one-in ones above: they are symmetric in the
:math:`n+1` augmented points (the posterior given all of them), so the test point is *weighted*
exchangeable with the training points and, for the true ratio and exact :math:`\sigma`,
:math:`P(Y_{n+1} \in C_\alpha) \ge 1 - \alpha` under the shift. The two importance weightings
compose and do not interact: the add-one-in weights :math:`\bar w_s(y)` act over the posterior
*draws* (they give the scores), the shift weights :math:`w(x_i)` over the *points* (they give the
rank). Grouped and weighted, the sums run over the test point's group. Equal weights are the
unweighted ranks exactly (the same code path).

References
----------
Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34 (arXiv 2106.06137).
Vovk, V., Gammerman, A. and Shafer, G. (2005). Algorithmic Learning in a Random World (full conformal).
Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction under
covariate shift. NeurIPS 32.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from calibprob._core import progress as _progress
from calibprob._core.deprecation import renamed_keywords
from calibprob._core.estimator import BaseEstimator, check_is_fitted
from calibprob._core.labels import refuse_kind_clash
from calibprob._core.ranks import exact_level, lower_rank, min_conformal_points
from calibprob._core.validation import check_choice, check_confidence_levels, check_int
from calibprob.calibrators._weighted import equal_weights
from calibprob.calibrators.conformal._intervals import level_form
from calibprob.calibrators.conformal.bayes import _ends, _inputs
from calibprob.calibrators.conformal.bayes._numerics import (
    Scratch,
    aoi_block,
    log_weights,
    pareto_khat,
    runs,
    shifted_likelihood,
)
from calibprob.calibrators.conformal.split_calibrator import checked_test_weights, split_test_weights
from calibprob.predictive import CalibprobWarning
from calibprob.weights import Weights, resolve

__all__ = ["ConformalBayes"]

#: Bytes the per-block temporaries (draws x rows) may take by default.
_BLOCK_BYTES = 32 * 2**20
#: End-only mode's blocks of a C-ordered input (views, no copy) are this many times larger.
_ENDS_BLOCKS = 8
#: The full mode's: its only block-sized temporary is the float32 copy of the weights, so 4 times the rows take
#: twice a float64 block's bytes (at most 64 MB per thread by default); more rows per product run nearer the
#: floor (diabetes shape, both cores, quiet load: 0.617-0.644 s against 0.645-0.659 s with 2 times, measured).
_FULL_BLOCKS = 4


def _fallback_of_unseen_group(unseen_group: str) -> str | None:
    """The ``fallback`` of the deprecated ``unseen_group``: "raise" -> None, "marginal" -> "pooled"."""
    check_choice(unseen_group, "unseen_group", ("raise", "marginal"))
    return None if unseen_group == "raise" else "pooled"


class ConformalBayes(BaseEstimator):
    r"""Conformal Bayes (Fong and Holmes 2021): finite-sample-valid sets from one posterior, no holdout.

    ``fit`` takes the training pointwise log-likelihood of the posterior draws; ``predict`` takes
    the same draws' log density of candidate values on a grid at the test points and returns the
    contract's interval family (:func:`calibprob.evaluate` scores it) with, per test point, the
    conformal p-value curve and diagnostics. See ``calibprob.calibrators.conformal.bayes.estimator`` for
    the equations; :func:`calibprob.conformal_bayes` does it all from a PyMC model.

    Parameters
    ----------
    confidence_level : float or sequence of float, default 0.9
        Default levels :math:`1-\alpha` of :meth:`predict`.
    min_grid_mass : float, default 0.99
        A test point whose posterior predictive puts less than this mass on the grid is refused
        (the set could leave the grid).
    min_ess : float, default 100
        Warn where the AOI weights' effective sample size at the set's boundary falls below this.
    max_pareto_k : float, default 0.7
        Warn where the Pareto :math:`\hat k` of those weights exceeds this (Vehtari et al. 2024).
    pareto_k : bool, default True
        Compute :math:`\hat k` (one generalised-Pareto fit per test point, arviz-stats' ``psislw`` rule vectorised).
    fallback : {None, "pooled"}, default None
        A test group absent from training: refuse it (None), or rank its points among all
        training points (``"pooled"``, as :class:`calibprob.Mondrian`'s fallback), labelled
        ``marginal_fallback`` in the output (marginal coverage only for those points). Called
        ``unseen_group`` (``"raise"`` / ``"marginal"``) before 0.2.0; the old keyword warns
        ``FutureWarning`` until 0.3.0.
    chunk_size : int, optional
        (test point, grid value) rows per block; default: temporaries of about 32 MB per thread (on a
        C-ordered float64 input, read in place, the full mode's float32 weights take up to 64 MB). Memory is
        :math:`O(S \cdot (n + \text{chunk\_size}))`, never :math:`S \times n \times G`. Called
        ``block_rows`` before 0.2.0 (warns ``FutureWarning`` until 0.3.0).
    n_jobs : int, optional
        Threads over blocks of test points (at most :math:`2\,n_\text{jobs}` blocks in memory),
        and over the refinement's rows (each thread bisects its own rows); default: the cores this process may use
        (``os.sched_getaffinity``). It is the call's whole thread budget: BLAS runs one thread per
        block while the call lasts (``threadpoolctl``), so ``n_jobs=1`` uses one core. The sets are
        bitwise the same whatever ``n_jobs``. Large blocks take a fused path compiled with Numba
        on first use (cached on disk; about 0.5 s once per process to load).
    progress : bool, optional
        A progress line (test points done, then the set ends refined) once a call has run a few
        seconds: ``True`` shows it, ``False`` hides it; default: :func:`calibprob.show_progress`'s
        setting, else shown on a terminal or in a notebook (``calibprob._core.progress``).
    grid_mode : {"full", "ends"}, default "full"
        ``"full"``: ranks at every grid value. ``"ends"``: ranks at a coarse scan of the grid and at
        the bisection of each set end on grid indices (about 20 of 100 values per test point), the
        other values taking the smaller rank of their evaluated neighbours; a test point whose set
        the scan sees in several pieces (or empty) is evaluated on the full grid, counted in
        ``attrs["n_full_grid"]`` (``calibprob.calibrators.conformal.bayes._ends``). The sets equal
        the full mode's where the p-value does not dip between two evaluated values inside the set
        (always for a unimodal p-value); ``p_value`` is NaN at the values not evaluated (the
        ``evaluated`` mask), ``ess``, ``min_ess`` and ``pareto_k`` are the full mode's. It needs one
        common shift of the log-likelihood (``_numerics.shifted_likelihood``; real data): otherwise
        the full grid is used. Its element-wise pass keeps no block-sized temporary, so on a
        C-ordered float64 input (read in place) its blocks are 8 times the full mode's (more rows per
        matrix product), in a multiple of ``n_jobs`` blocks of about equal size.

    Attributes
    ----------
    log_likelihood_ : ndarray, shape (S, n)
    n_train_, n_draws_ : int
    sample_shape_ : list of int or None
        (chain, draw) sizes when fitted on ArviZ-shaped input.
    y_train_ : ndarray or None
        The observed targets (from the tree's ``observed_data``, or ``y=``), to check the grid.
    train_groups_ : ndarray or None
    calibration_weights_ : ndarray or None
        The training points' covariate-shift weights (``fit(weights=)``; None unweighted).
    weights_ : calibprob.weights.Weights or None
        The weights object given to :meth:`fit` (its test weights are the default at :meth:`predict`,
        its ``on_small`` decides what a level the weights cannot attain does).
    weight_diagnostics_ : calibprob.weights.WeightDiagnostics
        After a weighted :meth:`predict`: effective sample sizes, largest weight, attainable level.

    Weights (covariate shift: ``fit(..., weights=)`` for the training points, ``predict(...,
    weights=)`` for the test points, each an array or a :mod:`calibprob.weights` object) weight
    the conformal rank as in the module docstring (Tibshirani et al. 2019), with their finite-sample
    guarantee for the true ratio; a level above the weights' attainable one (the
    :func:`calibprob.weights.check_attainable` rule) is refused, or warned about with
    ``on_small="warn"`` on the weights object.

    References
    ----------
    Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34, §3 (add-one-in
    importance sampling, eq. 9), §3.3 (partial exchangeability).

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=30); mu = rng.normal(y.mean(), 1 / np.sqrt(30), size=2000)
    >>> ll = -0.5 * (y[None, :] - mu[:, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    >>> grid = np.linspace(-5, 5, 201)
    >>> logf = -0.5 * (grid[None, None, :] - mu[:, None, None]) ** 2 - 0.5 * np.log(2 * np.pi)
    >>> pred = calibprob.ConformalBayes(confidence_level=0.8).fit(ll).predict(logf, grid)
    >>> pred["lower"].dims, bool(pred["upper"].item() > pred["lower"].item())
    (('obs', 'confidence_level'), True)
    """

    # a calibprob.weights object (may hold a fitted classifier) is not written by save(); pass weights= after load
    _transient_attrs: tuple[str, ...] = ("weights_",)
    weights_: Any = None
    calibration_weights_: np.ndarray | None = None

    @renamed_keywords({"unseen_group": ("fallback", _fallback_of_unseen_group), "block_rows": "chunk_size"})
    def __init__(
        self,
        *,
        confidence_level: float | Sequence[float] = 0.9,
        min_grid_mass: float = 0.99,
        min_ess: float = 100.0,
        max_pareto_k: float = 0.7,
        pareto_k: bool = True,
        fallback: str | None = None,
        chunk_size: int | None = None,
        n_jobs: int | None = None,
        progress: bool | None = None,
        grid_mode: Literal["full", "ends"] = "full",
    ) -> None:
        self.confidence_level = confidence_level
        self.min_grid_mass = min_grid_mass
        self.min_ess = min_ess
        self.max_pareto_k = max_pareto_k
        self.pareto_k = pareto_k
        self.fallback = fallback
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.progress = progress
        self.grid_mode = grid_mode

    @renamed_keywords({"train_groups": "groups"})
    def fit(
        self,
        log_likelihood: Any,
        *,
        var_name: str | None = None,
        groups: Any = None,
        y: Any = None,
        weights: Any = None,
    ) -> ConformalBayes:
        r"""Store the training log-likelihood of the posterior draws.

        Parameters
        ----------
        log_likelihood : xarray.DataTree, xarray.DataArray or array_like
            A tree with a ``log_likelihood`` group (and ``observed_data``: its targets check the
            grid), a DataArray with ``chain``/``draw`` (or ``sample``) dims and the observations,
            or an (S, n) array, draws first.
        var_name : str, optional
            The observed variable, when the group holds several.
        groups : array_like or str, optional
            One group label per training point, or the name of a coordinate of the tree's
            ``observed_data`` (or log-likelihood) variable holding them: enables grouped
            conformal Bayes at :meth:`predict`. Called ``train_groups`` before 0.2.0 (warns
            ``FutureWarning`` until 0.3.0).
        y : array_like, optional
            The training targets, when ``log_likelihood`` is not a tree (to check the grid).
        weights : array_like or calibprob.weights.Weights, optional
            One covariate-shift weight :math:`w(x_i) \ge 0` per training point (the likelihood ratio
            of the test inputs' law to the training inputs'), or a :mod:`calibprob.weights` object
            (a :class:`~calibprob.weights.LikelihoodRatio` fitted on these training rows, a
            :class:`~calibprob.weights.GivenWeights`; a :class:`~calibprob.weights.DensityRatio`
            needs inputs: pass ``ratio(X_train)`` instead). Weighted conformal Bayes (class docstring).

        Returns
        -------
        ConformalBayes
            ``self``.
        """
        self._check_params()
        ll, shape, obs, da = _inputs.train_log_likelihood(log_likelihood, var_name)
        n = ll.shape[1]
        if y is None and obs is not None:
            y = np.asarray(obs.values, float).reshape(-1)
        if y is not None:
            y = np.asarray(y, float).reshape(-1)
            if y.shape[0] != n or not np.isfinite(y).all():
                raise ValueError(f"y must hold {n} finite training targets (one per column of log_likelihood).")
        self.train_groups_ = _inputs.train_groups_from(groups, n, obs, da)
        self.weights_ = weights if isinstance(weights, Weights) else None
        self.calibration_weights_ = None if weights is None else resolve(weights, n, side="calibration")
        self.log_likelihood_ = ll
        self.n_train_, self.n_draws_ = n, ll.shape[0]
        self.sample_shape_ = None if shape is None else list(shape)
        self.y_train_ = y
        return self

    def _check_params(self) -> None:
        check_confidence_levels(self.confidence_level, "confidence_level")
        if not (0.0 <= float(self.min_grid_mass) < 1.0):
            raise ValueError(
                f"min_grid_mass must be in [0, 1) (0 turns the predictive-mass check off); got {self.min_grid_mass!r}."
            )
        if not (np.isfinite(self.min_ess) and self.min_ess >= 0):
            raise ValueError(f"min_ess must be a finite number >= 0; got {self.min_ess!r}.")
        if not (np.isfinite(self.max_pareto_k) and self.max_pareto_k > 0):
            raise ValueError(f"max_pareto_k must be a finite number > 0; got {self.max_pareto_k!r}.")
        if self.fallback not in (None, "pooled"):
            raise ValueError(f"fallback must be None or 'pooled'; got {self.fallback!r}.")
        if self.chunk_size is not None:
            check_int(self.chunk_size, "chunk_size", minimum=1)
        if self.n_jobs is not None:
            check_int(self.n_jobs, "n_jobs", minimum=1)
        _progress._check_progress(self.progress)
        if self.grid_mode not in ("full", "ends"):
            raise ValueError(
                f"grid_mode must be 'full' (ranks at every grid value) or 'ends' (a coarse scan and the set "
                f"ends refined); got {self.grid_mode!r}."
            )

    def predict(
        self,
        test_log_density: Any,
        grid: Any,
        *,
        groups: Any = None,
        confidence_level: Any = None,
        log_density: Callable[[slice, np.ndarray], np.ndarray] | None = None,
        weights: Any = None,
    ) -> xr.Dataset:
        r"""Conformal Bayes sets on the grid at the test points.

        Parameters
        ----------
        test_log_density : array_like or xarray.DataArray, shape (S, n_test, G)
            :math:`\log f_{\theta_s}(y_g \mid x_j)` for the *same* draws, in the same order, as
            the training log-likelihood (a DataArray: ``chain``/``draw`` (or ``sample``) dims, a
            grid dim named ``grid`` or ``grid_point`` — else the last — and the test points).
        grid : array_like, shape (G,) or (n_test, G)
            Equispaced candidate values holding at least ``min_grid_mass`` of each test point's
            posterior predictive; one grid (G,) for every point must also span the training targets.
        groups : array_like, optional
            The test points' groups (needs ``groups`` at :meth:`fit`): rank within the group.
        confidence_level : float or sequence of float, optional
            Default: the constructor's.
        log_density : callable, optional
            ``log_density(rows, y) -> (S, len(rows), K)``: :math:`\log f_{\theta_s}(y_{jk} \mid x_j)`
            for the test points ``rows`` (a slice) at any candidates ``y`` of shape (len(rows), K),
            same draws in the same order. With it, each end of the set is refined between the
            last grid point inside and the first outside by bisection on the exact p-value
            (``REFINE_STEPS`` halvings, to :math:`2^{-10}` of the spacing) and reported at the
            outer end of the final bracket; without it, the end is the first grid point *outside*
            the set. Either way the reported interval contains the set's hull on the grid's span,
            so its coverage is at least the set's (``attrs["interval_ends"]`` says which).
            It is called from one thread at a time, unless it has an attribute ``thread_safe = True``
            (then the threads of ``n_jobs`` call it at once, each bisecting its own test points).
        weights : array_like or calibprob.weights.Weights, optional
            After a weighted :meth:`fit`: one positive weight :math:`w(x_j)` per test point (default: the
            weights object given to :meth:`fit`, e.g. a ``LikelihoodRatio``'s test rows). Refused after
            an unweighted fit.

        Returns
        -------
        xarray.Dataset
            The interval family (``attrs["family"] == "interval"``): ``lower``, ``upper``
            (obs, confidence_level) — the hull of the set with its ends refined or widened to the
            outer grid neighbour (see ``log_density``), :math:`\mp\infty` on a side where the
            set reaches the grid's edge or the group is too small; ``n_pieces`` (1: an
            interval), ``touches_edge``, ``grid_length`` (kept grid points × spacing, Fong and
            Holmes's length); per test point ``p_value`` and ``ess`` over the grid (``grid``),
            per test point *and level* ``min_ess`` and ``pareto_k`` (at that level's set boundary),
            ``n_ranked``; and with groups ``group`` and ``marginal_fallback``. Weighted, ``p_value`` is
            :math:`\pi_w` and ``attrs`` hold ``weights_ess`` and ``weights_attainable_level``.
        """
        check_is_fitted(self, "log_likelihood_", method="fit")
        # labelled test groups follow the test points' labels of a DataArray of test densities
        ref = _inputs.row_labels(test_log_density, skip=("grid", "grid_point"))
        groups = _inputs.aligned(groups, ref, "groups", "test_log_density")
        arr = _inputs.test_density_array(test_log_density, self.n_draws_, self.sample_shape_)
        m, G = arr.shape[1], arr.shape[2]
        test_weights = self._test_weights(weights, m)
        g = _inputs.check_grid(grid, m, G)
        if np.ndim(grid) == 1:
            # one grid for every point must span the training targets (Fong and Holmes's rule); a grid per
            # test point is placed on that point's predictive, and min_grid_mass checks it holds its bulk
            _inputs.check_grid_covers(g, self.y_train_)
        contiguous = isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.flags.c_contiguous
        per = self._points_per_block(G, m, views=contiguous)

        def blocks() -> Iterator[tuple[slice, np.ndarray]]:
            for start in range(0, m, per):
                sl = slice(start, min(start + per, m))
                # a C-ordered float64 input is used as a view (each draw's slab is contiguous); otherwise one
                # contiguous copy of the slab: reductions over the draws of a transposed view are ~10x slower
                yield sl, np.asarray(arr[:, sl, :]) if contiguous else np.ascontiguousarray(arr[:, sl, :], dtype=float)

        if log_density is not None and not callable(log_density):
            raise TypeError(
                f"log_density must be a callable log_density(rows, y) -> (S, len(rows), K); got "
                f"{type(log_density).__name__}. Pass None to report the outer grid neighbours instead."
            )
        return self._predict_blocks(
            blocks(),
            g,
            groups=groups,
            confidence_level=confidence_level,
            log_density=log_density,
            test_weights=test_weights,
        )

    def _test_weights(self, weights: Any, m: int) -> tuple[np.ndarray, Any] | None:
        """``(test weights, their source)`` after a weighted fit (None unweighted); see :meth:`predict`."""
        return split_test_weights(self, weights, m)

    def predict_interval(
        self,
        test_log_density: Any,
        grid: Any,
        confidence_level: Any = None,
        *,
        groups: Any = None,
        log_density: Callable[[slice, np.ndarray], np.ndarray] | None = None,
        weights: Any = None,
    ) -> xr.Dataset:
        """The interval family's name for :meth:`predict` (every interval method has one; here they agree).

        Conformal Bayes returns central sets' hulls only, so its ``predict`` already is the interval
        prediction; this method takes the same arguments (``confidence_level`` also by position, as in the
        other interval methods' ``predict_interval(X, confidence_level)``) and returns the same Dataset, but
        for the interval family's one rule on the dimension: a scalar level (or, none asked, a scalar
        constructor level) drops ``confidence_level``, kept as a scalar coordinate
        (``calibprob.calibrators.conformal._intervals.level_form``).
        """
        out = self.predict(
            test_log_density,
            grid,
            groups=groups,
            confidence_level=confidence_level,
            log_density=log_density,
            weights=weights,
        )
        return level_form(out, confidence_level, self.confidence_level)

    def _points_per_block(self, G: int, m: int, *, views: bool = False) -> int:
        """Test points per block: ``chunk_size`` rows, or temporaries of about ``_BLOCK_BYTES``.

        On a C-ordered input (``views``: each block is a view, no copy) the blocks are larger, in a multiple
        of the threads' count of about equal blocks (the threads finish together): end-only mode's element-wise
        pass keeps no block-sized temporary (``_ends.row_stats``), so :data:`_ENDS_BLOCKS` times larger; the
        full mode keeps only the float32 weights (``_numerics.chunked_sums``), so :data:`_FULL_BLOCKS` times
        (more rows per matrix product, each streaming the training matrix, run nearer the floor; measured).
        """
        rows = self.chunk_size or max(1, _BLOCK_BYTES // (8 * self.n_draws_))
        per = max(1, rows // G)
        if views and self.chunk_size is None:
            per = balanced_block((_ENDS_BLOCKS if self.grid_mode == "ends" else _FULL_BLOCKS) * per, m, self.n_jobs)
        return per

    def _members(self, groups: Any, m: int) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
        """Per test point: the training points it ranks among, and whether that is a fallback."""
        if groups is None:
            return None, None, np.zeros(m, bool)
        if self.train_groups_ is None:
            raise ValueError("groups= needs the training points' groups: fit(..., groups=labels or a coordinate name).")
        labels = _inputs.group_labels(groups, m, "groups")
        refuse_kind_clash(labels, self.train_groups_, "groups", "train_groups")
        seen = set(self.train_groups_.tolist())
        unseen = sorted({str(v) for v in labels.tolist() if v not in seen})
        if unseen and self.fallback is None:
            raise ValueError(
                f"groups: {len(unseen)} test group(s) never seen in training ({', '.join(unseen[:5])}); seen: "
                f"{sorted(map(str, seen))[:10]}. Grouped conformal Bayes ranks within a seen group. Pass "
                "ConformalBayes(fallback='pooled') to rank those points among all training points "
                "(marginal coverage only, labelled marginal_fallback)."
            )
        fallback = np.array([v not in seen for v in labels.tolist()], bool)
        return labels, self.train_groups_, fallback

    def _predict_blocks(
        self,
        blocks: Iterable[tuple[slice, Any]],
        g: np.ndarray,
        *,
        groups: Any = None,
        confidence_level: Any = None,
        log_density: Callable[[slice, np.ndarray], np.ndarray] | None = None,
        test_weights: tuple[np.ndarray, Any] | None = None,
    ) -> xr.Dataset:
        """The core loop over blocks ``(slice of test points, logf (S, b, G))``; see :meth:`predict`.

        ``test_weights``: :meth:`_test_weights`' ``(weights, source)`` after a weighted fit, else None.
        """
        levels = check_confidence_levels(
            self.confidence_level if confidence_level is None else confidence_level, "confidence_level"
        )
        m, G = g.shape
        labels, train_labels, fallback = self._members(groups, m)
        E, c = shifted_likelihood(self.log_likelihood_)
        E32 = E.astype(np.float32) if c.ndim == 0 else None
        ess = np.empty((m, G))
        attrs: dict[str, Any] = {}
        ranking = self._ranking(levels, G, labels, train_labels, fallback, test_weights, attrs)
        member, n_ranked, shift = ranking.member, ranking.n_ranked, ranking.shift
        rank, thresholds, denominator = ranking.rank, ranking.thresholds, ranking.denominator
        # the AOI log weights at each level's deciding point: Pareto k-hat per test point and level
        logw_focus = np.empty((self.n_draws_, m, len(levels)))

        scratch = Scratch()  # per-thread buffers of the fused path, freed with this call
        # end-only needs one common shift's float32 screen and integer ranks: weighted ranks (shift) use the full grid
        end_only = self.grid_mode == "ends" and E32 is not None and shift is None
        marks = np.ones((m, G), bool), np.zeros(m, bool)  # end-only mode: values ranked, points on the full grid

        def work(item: tuple[slice, Any]) -> int:
            sl, logf = item
            if callable(logf):  # a door's block, evaluated in this thread (its model work runs in parallel too)
                logf = logf()
            b = logf.shape[1]

            def check() -> None:  # a NaN, +inf or all -inf row in the block: the precise error
                _inputs.check_log_density(logf, "test_log_density", allow_minus_inf=True)
                _check_support(logf, g[sl], sl.start)

            if end_only and E32 is not None:  # end_only implies the common float32 screen
                r, e, log_norm = self._end_block(logf, E, c, E32, member, sl, thresholds, check, scratch, marks)
            else:
                members = None if member is None else np.repeat(member[sl], G, axis=0)
                point_w = None if shift is None else shift[0]
                r, e, log_norm = aoi_block(
                    logf, self.log_likelihood_, E, c, members, E32, check=check, scratch=scratch, point_weights=point_w
                )
            self._check_mass(log_norm.reshape(b, G), g[sl], sl.start)
            rank[sl] = r.reshape(b, G) if shift is None else r.reshape(b, G) + shift[1][sl, None]
            ess[sl] = e.reshape(b, G)
            for k in range(len(levels)):
                focus = _focus_points(rank[sl], ess[sl], thresholds[sl, k])
                logw_focus[:, sl, k] = log_weights(logf[:, np.arange(b), focus])
            return b

        # a line once the work runs longer than a few seconds (the blocks' log densities, often the
        # PyMC door's, are computed as the loop asks for them, so the line times them too)
        with _progress.bar(desc="conformal Bayes", unit=" test points", total=m, progress=self.progress) as line:
            # blocks write disjoint slices of the outputs, so they run in threads (NumPy's matrix product and
            # element-wise work release the GIL); each block's arithmetic is the one-thread arithmetic, so the result
            # is bitwise the same whatever n_jobs (the call's whole thread budget: BLAS runs one thread per block)
            with threadpool_limits(1, user_api="blas"):
                for b in _bounded_map(work, blocks, _n_jobs(self.n_jobs)):
                    line.update(b)
                out = _set_summaries(rank, thresholds, g)
                refiner = _EndRefiner(self.log_likelihood_, E, c, E32, member, thresholds)
                ends = self._interval_ends(out, refiner, log_density, shift, scratch, line)
        for key in ("lower_in", "upper_in", "lower_out", "upper_out"):
            out.pop(key, None)
        ds = self._assemble(out, rank, denominator, ess, n_ranked, g, levels, thresholds, logw_focus)
        ds.attrs["interval_ends"] = ends
        ds.attrs.update(attrs)
        if self.grid_mode == "ends":
            _mark_evaluated(ds, *marks)
        if labels is not None:
            ds["group"] = ("obs", labels)
            ds["marginal_fallback"] = ("obs", fallback)
        self._warn(ds, levels, labels)
        return ds

    def _interval_ends(
        self,
        out: dict,
        refine: _EndRefiner,
        log_density: Callable[[slice, np.ndarray], np.ndarray] | None,
        shift: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        scratch: Scratch,
        line: Any,
    ) -> str:
        """Set ``out``'s ``lower`` / ``upper``: the outer grid neighbours, or refined by bisection when the
        log density can be evaluated off the grid; returns how the ends were found (``attrs["interval_ends"]``)."""
        if log_density is None:
            out["lower"], out["upper"] = out.pop("lower_out"), out.pop("upper_out")
            return "outer grid neighbours"
        if shift is not None:
            refine.point_weights, refine.test_weights = shift[0], shift[1]
        refine.n_jobs, refine.scratch = _n_jobs(self.n_jobs), scratch
        out["lower"], out["upper"] = refine(log_density, out, line)
        return f"refined by bisection on the p-value ({REFINE_STEPS} halvings of the grid spacing)"

    def _ranking(
        self,
        levels: np.ndarray,
        G: int,
        labels: np.ndarray | None,
        train_labels: np.ndarray | None,
        fallback: np.ndarray,
        test_weights: tuple[np.ndarray, Any] | None,
        attrs: dict,
    ) -> SimpleNamespace:
        r"""Who each test point ranks among, and the rank's storage, keep thresholds and p-value denominator.

        Unweighted: the integer rank :math:`1 + \#\{i : \sigma_i \le \sigma_{n+1}\}` against
        :math:`\lfloor\alpha(n_j+1)\rfloor`; weighted (``shift`` set, :meth:`_shift`): the weighted count plus
        the test point's own weight against :math:`\alpha(W_j + t_j)` (:func:`weighted_keep_thresholds`).
        """
        m = fallback.size
        n_ranked = np.full(m, self.n_train_, np.int64)
        member: np.ndarray | None = None
        if labels is not None and train_labels is not None:
            member = (train_labels[None, :] == labels[:, None]) | fallback[:, None]
            n_ranked = member.sum(axis=1)
        shift = None if test_weights is None else self._shift(test_weights, levels, member, attrs)
        rank: np.ndarray
        if shift is None:
            thresholds = np.stack([lower_rank_vec(1.0 - float(lv), n_ranked) for lv in levels], axis=1)
            rank, denominator = np.empty((m, G), np.int64), n_ranked + 1.0
        else:  # the weighted count of the training points at or below, plus the test point's own weight
            _, t, total = shift
            thresholds = weighted_keep_thresholds(levels, total, t)
            rank, denominator = np.empty((m, G)), total + t
        return SimpleNamespace(
            member=member, n_ranked=n_ranked, shift=shift, rank=rank, thresholds=thresholds, denominator=denominator
        )

    def _shift(
        self, test_weights: tuple[np.ndarray, Any], levels: np.ndarray, member: np.ndarray | None, attrs: dict
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        r"""``(training weights, test weights, each test point's training total)``; None for equal weights.

        The attainable-level check of every weighted method runs first (``checked_test_weights``:
        refuse or warn per the weights' ``on_small``, diagnostics to ``weight_diagnostics_`` and
        ``attrs``). All-equal weights are the unweighted method, computed by it (bit for bit). The
        weights are divided by their smallest positive value (the rule is scale-free), so integer
        weights stay exact integers in the sums.
        """
        t = checked_test_weights(self, levels, test_weights, attrs)
        w = np.asarray(self.calibration_weights_, float)
        if equal_weights(w, t):
            return None
        ref = float(np.min(np.concatenate([w[w > 0], t])))
        w, t = w / ref, t / ref
        total = np.full(t.size, w.sum()) if member is None else member @ w
        return w, t, total

    def _end_block(
        self,
        logf: np.ndarray,
        E: np.ndarray,
        c: np.ndarray,
        E32: np.ndarray,
        member: np.ndarray | None,
        sl: slice,
        thresholds: np.ndarray,
        check: Callable[[], None],
        scratch: Scratch,
        marks: tuple[np.ndarray, np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ranks, ESS and log norms of a block by end-only evaluation (``_ends``); ``marks`` (the values
        ranked, the points on the full grid) are filled in for the block's points."""
        b, G = logf.shape[1], logf.shape[2]
        st = _ends.row_stats(logf, check, scratch)

        def evaluate(pts: np.ndarray, idx: np.ndarray) -> np.ndarray:
            members = None if member is None else member[sl][pts]
            return _ends.ranks_at(st, pts * G + idx, logf, self.log_likelihood_, E, c, E32, members, scratch)

        r, marks[0][sl], marks[1][sl] = _ends.end_ranks(evaluate, b, G, thresholds[sl])
        return r, st.ess, st.log_norm

    def _check_mass(self, log_norm: np.ndarray, g: np.ndarray, start: int) -> None:
        """Refuse test points whose posterior predictive leaves the grid (the set would be clipped)."""
        # p(y_g | x_j) = mean_s f_s(y_g) = exp(LSE_s - log S), integrated with rectangles
        mass = np.exp(log_norm - np.log(self.n_draws_)).sum(axis=1) * (g[:, 1] - g[:, 0])
        low = mass < self.min_grid_mass
        if low.any():
            j = int(np.argmax(low))
            raise ValueError(
                f"grid: test point {start + j}'s posterior predictive puts only {mass[j]:.3f} of its mass on "
                f"[{g[j, 0]:.6g}, {g[j, -1]:.6g}] (min_grid_mass={self.min_grid_mass}); the set could leave the "
                "grid and would be clipped. Widen the grid to cover the predictive's bulk (or lower min_grid_mass)."
            )

    def _assemble(
        self,
        out: dict[str, np.ndarray],
        rank: np.ndarray,
        denominator: np.ndarray,
        ess: np.ndarray,
        n_ranked: np.ndarray,
        g: np.ndarray,
        levels: np.ndarray,
        thresholds: np.ndarray,
        logw_focus: np.ndarray,
    ) -> xr.Dataset:
        m, G = rank.shape
        L = len(levels)
        focus_ess = np.array(
            [[ess[j][_focus_mask(rank[j], thresholds[j, k])].min() for k in range(L)] for j in range(m)]
        ).reshape(m, L)
        if self.pareto_k:
            khat = np.stack([self._pareto_k(logw_focus[:, :, k]) for k in range(L)], axis=1)
        else:
            khat = np.full((m, L), np.nan)
        ds = xr.Dataset(
            {name: (("obs", "confidence_level"), v) for name, v in out.items()},
            coords={"obs": np.arange(m), "confidence_level": levels, "grid_point": np.arange(G)},
        )
        ds["p_value"] = (("obs", "grid_point"), rank / denominator[:, None])
        ds["grid"] = (("obs", "grid_point"), np.ascontiguousarray(g))
        ds["ess"] = (("obs", "grid_point"), ess)
        ds["min_ess"] = (("obs", "confidence_level"), focus_ess)
        ds["pareto_k"] = (("obs", "confidence_level"), khat)
        ds["n_ranked"] = ("obs", n_ranked)
        ds.attrs.update(method="conformal-bayes", family="interval", n_train=self.n_train_, n_draws=self.n_draws_)
        return ds

    def _pareto_k(self, logw: np.ndarray) -> np.ndarray:
        # arviz-stats' psislw k-hat (matched to 1e-12 in the tests), vectorised over the test points
        return pareto_khat(logw)

    def _warn(self, ds: xr.Dataset, levels: np.ndarray, labels: np.ndarray | None) -> None:
        """One warning per call, a line per problem and level (diagnostics are per test point and level)."""
        lines = _diagnostic_lines(ds, self.min_ess, self.max_pareto_k)
        small = np.isinf(ds["lower"].values) & np.isinf(ds["upper"].values) & (ds["grid_length"].values < 0)
        for k, c in enumerate(levels):
            rows = np.flatnonzero(small[:, k])
            if rows.size and "weights_ess" in ds.attrs:
                lines.append(
                    f"confidence_level={c:g}: at {rows.size} test point(s) the point's own weight t/(W + t) exceeds "
                    f"alpha = {1 - c:g} (the weights' attainable level is "
                    f"{ds.attrs['weights_attainable_level']:.4g}): they get the whole real line (-inf, inf). "
                    "Lower the level, or add training points near those test inputs."
                )
            elif rows.size:
                need = min_conformal_points(float(c))
                who = sorted({str(labels[j]) for j in rows}) if labels is not None else ["(all training points)"]
                lines.append(
                    f"confidence_level={c:g}: group(s) {', '.join(who[:8])} have fewer than {need} training points "
                    f"(the level needs alpha (n_j + 1) >= 1, n_j >= {need}); their {rows.size} test point(s) get the "
                    "whole real line (-inf, inf). Lower the level or pool groups."
                )
        if lines:
            warnings.warn("conformal Bayes:\n- " + "\n- ".join(lines), CalibprobWarning, stacklevel=4)


#: Bisection steps of each refined set end: the bracket shrinks to 2**-10 of the grid spacing.
REFINE_STEPS = 10


class _EndRefiner:
    r"""Refine the set's hull ends between grid points by bisection on the exact conformal p-value.

    The p-value :math:`\pi(y)` is computed exactly (up to the draws' Monte Carlo error) at any
    candidate by the same add-one-in ranks as on the grid; each end's bracket (last grid point
    inside, first outside) is halved ``REFINE_STEPS`` times and the *outer* end of the final
    bracket is reported, so the interval contains the set near that end. Weighted (``point_weights``
    and ``test_weights`` set), the rank is the weighted count of the module docstring.
    """

    def __init__(
        self,
        log_lik: np.ndarray,
        E: np.ndarray,
        c: np.ndarray,
        E32: np.ndarray | None,
        member: np.ndarray | None,
        thresholds: np.ndarray,
    ) -> None:
        self.log_lik, self.E, self.c, self.E32 = log_lik, E, c, E32
        self.member, self.thresholds = member, thresholds
        self.n_jobs: int = 1  # threads over each step's blocks of rows
        self.scratch: Scratch | None = None  # per-thread buffers
        self.point_weights: np.ndarray | None = None  # the shift weights (weighted conformal Bayes)
        self.test_weights: np.ndarray | None = None
        self._lock = threading.Lock()  # a user's log_density need not be thread-safe: one call at a time

    def __call__(
        self, log_density: Callable[[slice, np.ndarray], np.ndarray], out: dict[str, np.ndarray], line: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        lo_in, lo_out = out["lower_in"].copy(), out["lower_out"].copy()
        up_in, up_out = out["upper_in"].copy(), out["upper_out"].copy()
        m, L = lo_in.shape
        # only finite brackets are refined (an infinite end, an empty set or a too-small group stay as they are)
        act = np.concatenate([np.isfinite(lo_in) & np.isfinite(lo_out), np.isfinite(up_in) & np.isfinite(up_out)], 1)
        if not act.any():
            return lo_out, up_out
        inside = np.concatenate([lo_in, up_in], axis=1)
        outside = np.concatenate([lo_out, up_out], axis=1)
        thr = np.concatenate([self.thresholds, self.thresholds], axis=1)
        rows_needed = np.flatnonzero(act.any(axis=1))
        # the rows split over the threads, within the memory cap; a row's bisection depends on its own row only,
        # so each chunk runs all its steps in one task (no barrier between steps)
        cap = max(1, _BLOCK_BYTES // (8 * self.log_lik.shape[0] * 2 * L))
        per = max(1, min(cap, -(-rows_needed.size // self.n_jobs)))
        chunks = [rows_needed[start : start + per] for start in range(0, rows_needed.size, per)]
        # a log density that says it is thread-safe (the PyMC door's) is called without the refiner's lock
        lock = contextlib.nullcontext() if getattr(log_density, "thread_safe", False) else self._lock
        if line is not None:
            line.set_description("conformal Bayes: refining set ends")
            line.reset(total=REFINE_STEPS * rows_needed.size)

        def bisect(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            ins, outs, a, t = inside[rows], outside[rows], act[rows], thr[rows]
            for _ in range(REFINE_STEPS):
                mid = 0.5 * (ins + outs)
                # inactive entries are evaluated at an active candidate of their row (a finite value in the support)
                fill = mid[np.arange(rows.size), np.argmax(a, axis=1)]
                mid = np.where(a, mid, fill[:, None])
                keep = self._inside(log_density, rows, mid, t, a, lock)
                ins = np.where(a & keep, mid, ins)
                outs = np.where(a & ~keep, mid, outs)
            return rows, outs

        for rows, outs in _bounded_map(bisect, chunks, min(self.n_jobs, len(chunks))):
            outside[rows] = outs
            if line is not None:
                line.update(REFINE_STEPS * rows.size)
        return outside[:, :L], outside[:, L:]

    def _inside(
        self,
        log_density: Callable[[slice, np.ndarray], np.ndarray],
        rows: np.ndarray,
        y: np.ndarray,
        thr: np.ndarray,
        act: np.ndarray,
        lock: Any,
    ) -> np.ndarray:
        # the callable takes a slice of consecutive test points: ask for the span, use the rows needed
        sl = slice(int(rows[0]), int(rows[-1]) + 1)
        if rows.size == sl.stop - sl.start:
            span = y  # no gap: the rows are the span (y is a fresh array of this step's chunk)
        else:
            span = np.zeros((sl.stop - sl.start, y.shape[1]))
            span[rows - sl.start] = y
        with lock:
            logf = np.asarray(log_density(sl, span), dtype=float)
        if logf.shape != (self.log_lik.shape[0], span.shape[0], span.shape[1]):
            raise ValueError(
                f"log_density(rows, y) must return shape (S, len(rows), K) = ({self.log_lik.shape[0]}, "
                f"{span.shape[0]}, {span.shape[1]}); got {logf.shape}. Return the same draws' log densities."
            )
        if rows.size < span.shape[0]:  # a gap in the rows: their columns only (else the block as it came)
            logf = logf[:, rows - sl.start]
        members = None if self.member is None else np.repeat(self.member[rows], y.shape[1], axis=0)
        r, _, _ = aoi_block(
            np.ascontiguousarray(logf),
            self.log_lik,
            self.E,
            self.c,
            members,
            self.E32,
            scratch=self.scratch,
            point_weights=self.point_weights,
        )
        r = r.reshape(y.shape)
        if self.test_weights is not None:
            r = r + self.test_weights[rows, None]
        return (r > thr) & act


def _mark_evaluated(ds: xr.Dataset, done: np.ndarray, n_full: np.ndarray) -> None:
    """End-only mode's output: p-values NaN where not ranked, the ``evaluated`` mask and the counts."""
    ds["p_value"] = ds["p_value"].where(done)
    ds["evaluated"] = (("obs", "grid_point"), done)
    ds.attrs.update(grid_mode="ends", n_full_grid=int(n_full.sum()), n_evaluated=int(done.sum()))


def _check_support(logf: np.ndarray, g: np.ndarray, start: int) -> None:
    """Refuse a (test point, grid value) whose density is zero at every draw: no AOI weights there."""
    dead = np.isneginf(logf).all(axis=0)
    if dead.any():
        j, k = (int(v) for v in np.argwhere(dead)[0])
        raise ValueError(
            f"test_log_density is -inf at every draw for test point {start + j}, grid value {g[j, k]:.6g}: "
            "the add-one-in weights are undefined there. Restrict the grid to the likelihood's support."
        )


def balanced_block(per: int, m: int, n_jobs: int | None) -> int:
    """Points per block, at most ``per``, for a multiple of the threads' count (``n_jobs``, None: the cores) of
    blocks of about equal size over ``m`` points (the threads finish together)."""
    jobs = _n_jobs(n_jobs)
    n_blocks = jobs * -(-m // (jobs * max(1, per)))
    return max(1, -(-m // n_blocks))


def _n_jobs(n_jobs: int | None) -> int:
    """Threads: ``n_jobs``, or the cores this process may use."""
    if n_jobs is not None:
        return int(n_jobs)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _bounded_map(fn: Callable[[Any], Any], items: Iterable[Any], n_jobs: int) -> Iterator[Any]:
    """``fn`` over ``items`` in ``n_jobs`` threads, at most ``2 n_jobs`` in flight.

    A generator of blocks is not drained ahead (memory stays a few blocks); results come in
    order and the first error is raised in order.
    """
    if n_jobs == 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * n_jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def lower_rank_vec(alpha: float, n: np.ndarray) -> np.ndarray:
    r""":math:`\lfloor \alpha (n_j + 1) \rfloor` for each :math:`n_j` (the keep threshold of a rank)."""
    return np.array([lower_rank(alpha, int(v)) for v in np.atleast_1d(n)], np.int64)


def weighted_keep_thresholds(levels: np.ndarray, total: np.ndarray, test_weights: np.ndarray) -> np.ndarray:
    r"""Per test point and level, the weighted count a candidate must exceed: :math:`\alpha (W_j + t_j)`, shape (m, L).

    :math:`\pi_w(y) > \alpha \iff \sum_i w_i \mathbf 1[\sigma_i \le \sigma_{n+1}] + t_j > \alpha (W_j + t_j)`,
    :math:`W_j` the training weights' total (in the point's group), :math:`t_j` its own weight. The product
    is taken in exact rational arithmetic (:math:`\alpha` as :func:`~calibprob._core.ranks.exact_level`,
    :math:`W_j + t_j` as its float) and rounded once, so integer weights decide exactly as the
    unweighted :math:`\lfloor\alpha(n+1)\rfloor`. Where :math:`t_j` alone exceeds it every candidate
    passes: 0, the marker of the whole line (as a group too small for the level).
    """
    out = np.empty((test_weights.size, len(levels)))
    for k, lv in enumerate(levels):
        alpha = 1 - exact_level(float(lv))
        out[:, k] = [float(alpha * Fraction(float(v))) for v in total + test_weights]
    return np.where(test_weights[:, None] > out, 0.0, out)


def _focus_mask(rank_row: np.ndarray, k: float) -> np.ndarray:
    """Grid points that decide the set: the widest level's set dilated by one point (or the mode)."""
    kept = rank_row > k
    if not kept.any() or kept.all():
        return rank_row == rank_row.max() if not kept.any() else np.ones_like(kept)
    dil = kept.copy()
    dil[1:] |= kept[:-1]
    dil[:-1] |= kept[1:]
    return dil


def _focus_points(rank: np.ndarray, ess: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per test point, the grid index of least ESS among its deciding points."""
    out = np.empty(rank.shape[0], np.int64)
    for j in range(rank.shape[0]):
        e = np.where(_focus_mask(rank[j], k[j]), ess[j], np.inf)
        out[j] = int(np.argmin(e))
    return out


def _set_summaries(rank: np.ndarray, thresholds: np.ndarray, g: np.ndarray) -> dict[str, np.ndarray]:
    """Hull brackets, pieces, edge flag and grid length of :math:`\\{y_g: \\text{rank} > \\lfloor\\alpha(n_j+1)\\rfloor\\}`.

    Each finite end comes as a bracket: the outermost grid point inside the set (``*_in``) and its
    neighbour outside (``*_out``). A point whose group is too small for a level
    (:math:`\\alpha(n_j+1) < 1`) gets :math:`(-\\infty, \\infty)` and ``grid_length = -1`` as the
    marker of that case.
    """
    m, L = thresholds.shape
    nan = np.full((m, L), np.nan)
    lo_in, lo_out, up_in, up_out = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    pieces, edge, length = np.zeros((m, L), np.int64), np.zeros((m, L), bool), np.zeros((m, L))
    step = g[:, 1] - g[:, 0]
    for k in range(L):
        for j in range(m):
            if thresholds[j, k] == 0:  # alpha (n_j + 1) < 1: every candidate passes, whatever the grid
                lo_in[j, k] = lo_out[j, k] = -np.inf
                up_in[j, k] = up_out[j, k] = np.inf
                pieces[j, k], edge[j, k], length[j, k] = 1, True, -1.0
                continue
            kept = rank[j] > thresholds[j, k]
            pieces[j, k] = runs(kept)
            length[j, k] = kept.sum() * step[j]
            if not kept.any():
                continue
            idx = np.flatnonzero(kept)
            edge[j, k] = bool(kept[0] or kept[-1])
            lo_in[j, k], lo_out[j, k] = (-np.inf, -np.inf) if kept[0] else (g[j, idx[0]], g[j, idx[0] - 1])
            up_in[j, k], up_out[j, k] = (np.inf, np.inf) if kept[-1] else (g[j, idx[-1]], g[j, idx[-1] + 1])
    return {
        "lower_in": lo_in,
        "lower_out": lo_out,
        "upper_in": up_in,
        "upper_out": up_out,
        "n_pieces": pieces,
        "touches_edge": edge,
        "grid_length": length,
    }


def _levels_where(mask: np.ndarray, levels: np.ndarray) -> str:
    """``"0.8 (3 points), 0.9 (5 points)"``: the levels at which a (obs, level) mask holds, with counts."""
    return ", ".join(f"{lv:g} ({int(n)} point{'s' if n != 1 else ''})" for lv, n in zip(levels, mask.sum(0)) if n)


def _diagnostic_lines(ds: xr.Dataset, min_ess: float, max_k: float) -> list[str]:
    """The diagnostics' findings, per level: effective sample size, k-hat, edge hits, empty sets."""
    levels = ds["confidence_level"].values
    whole = ds["grid_length"].values < 0  # too-small group: the whole line by rule, no weights involved
    ess, khat = ds["min_ess"].values, ds["pareto_k"].values
    lines = []
    low = (ess < min_ess) & ~whole
    if low.any():
        lines.append(
            f"the add-one-in weights' effective sample size at the set's boundary is below {min_ess:g} (least "
            f"{ess[low].min():.1f}) at level(s) {_levels_where(low, levels)}; the p-values there carry Monte Carlo "
            "error. Draw more posterior samples (or check x far from the data)."
        )
    bad = (khat > max_k) & ~whole
    if bad.any():
        lines.append(
            f"Pareto k-hat of the add-one-in weights exceeds {max_k:g} (largest {np.nanmax(khat[bad]):.2f}) at "
            f"level(s) {_levels_where(bad, levels)}: the importance sampling is unreliable there. Draw more "
            "posterior samples or lower the level."
        )
    edge = ds["touches_edge"].values & ~whole
    if edge.any():
        lines.append(
            f"the set reaches the grid's edge at level(s) {_levels_where(edge, levels)}; that side is reported as "
            "-inf/inf (the set may extend beyond the grid). Widen the grid or lower the level."
        )
    empty = ds["n_pieces"].values == 0
    if empty.any():
        lines.append(
            f"the set is empty on the grid (lower/upper NaN) at level(s) {_levels_where(empty, levels)}; "
            "pass a finer grid."
        )
    return lines
