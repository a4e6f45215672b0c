r"""Array layer, conditional-coverage diagnostics: coverage by group, coverage gap, SSC, worst slab, HSIC.

Marginal coverage (:func:`interval_coverage`) is an average over all points:
90 % on average can hide 52 % in one group. These functions say where coverage
fails. Every one takes the per-observation indicators and widths

.. math::

    c_{ik} = \mathbb 1\{l_{ik} \le y_i \le u_{ik}\}, \qquad w_{ik} = u_{ik} - l_{ik},

of :func:`coverage_indicators` (observations on axis 0, confidence levels on
axis 1). An infinite bound (the explicit answer of a conformal method for a
group too small to resolve the level) counts as covering with infinite width;
no function returns NaN for it.

The definitions follow MAPIE 1.5 (``mapie.metrics.regression.regression_ssc``,
``hsic``; ``mapie.metrics.conditional.coverage_gap``, ``worst_slab_coverage``),
which calibprob matches on the same inputs (tests/metrics/test_conditional_mapie.py);
where a convention differs it is said in the function's notes.

References
----------
Angelopoulos, A. N. and Bates, S. (2021). A gentle introduction to conformal
prediction and distribution-free uncertainty quantification, §3 (size-stratified
coverage).

Cauchois, M., Gupta, S. and Duchi, J. C. (2021). Knowing what you know: valid and
validated confidence sets in multiclass and multilabel prediction. JMLR 22(81)
(worst-slab coverage).

Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J.
(2023). Class-conditional conformal prediction with many classes. NeurIPS
(coverage gap).

Feldman, S., Bates, S. and Romano, Y. (2021). Improving conditional coverage via
orthogonal quantile regression. NeurIPS (HSIC between coverage and width).

Romano, Y., Sesia, M. and Candès, E. J. (2020). Classification with valid and
adaptive coverage. NeurIPS (the split worst-slab estimate).
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from calibprob._core.validation import check_groups

__all__ = [
    "HSIC_MAX_N",
    "WSC_MAX_N",
    "coverage_indicators",
    "coverage_by_group",
    "worst_group",
    "coverage_gap",
    "size_stratified_coverage",
    "worst_slab_coverage",
    "hsic",
]

#: Above this many observations :func:`hsic` subsamples (seeded) with a warning: its two n x n
#: kernel matrices take 2 * 8 * n^2 bytes (64 MB at 2 000).
HSIC_MAX_N = 2000
#: Above this many points in the slab-finding part :func:`worst_slab_coverage` subsamples it
#: (seeded) with a warning: the scan costs O(M n m) operations and O(n m) memory per direction, m = ceil(delta n).
WSC_MAX_N = 1000


def _as_2d(values: ArrayLike, name: str) -> np.ndarray:
    """``values`` as an (n, k) array: a 1-D input is one level."""
    arr = np.asarray(values)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1-D (one level) or 2-D (n_obs, n_levels); got shape {arr.shape}.")
    return arr


def coverage_indicators(y: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-observation coverage indicators and widths of central intervals.

    .. math::

        c_{ik} = \mathbb 1\{l_{ik} \le y_i \le u_{ik}\}, \qquad w_{ik} = u_{ik} - l_{ik}

    Parameters
    ----------
    y : array_like, shape (n,)
    lower, upper : array_like, shape (n,) or (n, k)
        Bounds at k confidence levels; ``-inf`` / ``inf`` allowed (an unbounded
        interval covers, with infinite width).

    Returns
    -------
    covered : ndarray of bool, shape (n, k)
    widths : ndarray of float, shape (n, k)

    References
    ----------
    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §4 (empirical coverage and width).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import coverage_indicators
    >>> c, w = coverage_indicators([0.0, 3.0], [-1.0, -np.inf], [1.0, np.inf])
    >>> c.ravel().tolist(), w.ravel().tolist()
    ([True, True], [2.0, inf])
    """
    yv = np.asarray(y, float)
    lo = _as_2d(np.asarray(lower, float), "lower")
    hi = _as_2d(np.asarray(upper, float), "upper")
    covered = (lo <= yv[:, None]) & (yv[:, None] <= hi)
    with np.errstate(invalid="ignore"):
        widths = hi - lo
    return covered, widths


def coverage_by_group(covered: ArrayLike, widths: ArrayLike, groups: ArrayLike) -> dict:
    r"""Coverage and width per group, with the coverage's standard error and the count.

    For group :math:`g` with :math:`n_g` points and level :math:`k`:

    .. math::

        \hat c_{gk} = \frac{1}{n_g}\sum_{i \in g} c_{ik}, \qquad
        \operatorname{se}_{gk} = \sqrt{\hat c_{gk}(1-\hat c_{gk})/n_g}, \qquad
        \bar w_{gk} = \frac{1}{n_g}\sum_{i \in g} w_{ik}

    (the binomial standard error of a proportion, plugged in; 0 when
    :math:`\hat c \in \{0, 1\}`, so a test against the nominal level should use
    :math:`\sqrt{\alpha(1-\alpha)/n_g}` instead, as the ranking does).

    Parameters
    ----------
    covered : array_like of bool, shape (n, k)
    widths : array_like, shape (n, k)
    groups : array_like, shape (n,)
        One label per observation (read by ``calibprob._core.validation.check_groups``).

    Returns
    -------
    dict
        ``labels`` (sorted unique labels, shape (G,)), ``count`` (G,),
        ``coverage``, ``se``, ``width``, ``infinite`` (G, k). A group with an infinite
        interval has infinite mean width; ``infinite`` is the share of the group's
        points whose interval is unbounded (a Mondrian group too small for the level,
        a conformal set that is the whole line): they count as covered, but trivially.

    References
    ----------
    Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J. (2023).
    Class-conditional conformal prediction with many classes. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import coverage_by_group
    >>> r = coverage_by_group(np.array([[1], [0], [1], [1]], bool), np.ones((4, 1)), ["a", "a", "b", "b"])
    >>> r["labels"].tolist(), r["coverage"].ravel().tolist(), r["count"].tolist()
    (['a', 'b'], [0.5, 1.0], [2, 2])
    """
    cov = _as_2d(np.asarray(covered, bool), "covered")
    w = _as_2d(np.asarray(widths, float), "widths")
    # the package's one label reader: missing labels refused, 1 and "1" never merged into one group
    read = check_groups(groups, cov.shape[0])
    if read is None:
        raise ValueError("groups is None; pass one group label per observation (an array, Series or DataArray).")
    labels, inverse = np.unique(read, return_inverse=True)
    inverse = inverse.ravel()
    G = labels.size
    count = np.bincount(inverse, minlength=G)
    hits = np.stack([np.bincount(inverse, weights=cov[:, k], minlength=G) for k in range(cov.shape[1])], axis=1)
    coverage = hits / count[:, None]
    width = np.empty_like(coverage)
    infinite = np.empty_like(coverage)
    for k in range(w.shape[1]):
        finite = np.isfinite(w[:, k])
        s = np.bincount(inverse[finite], weights=w[finite, k], minlength=G)
        # an infinite interval makes its group's mean width infinite, never NaN
        n_inf = np.bincount(inverse[~finite], minlength=G)
        width[:, k] = np.where(n_inf > 0, np.inf, s / count)
        infinite[:, k] = n_inf / count
    se = np.sqrt(coverage * (1 - coverage) / count[:, None])
    return {"labels": labels, "count": count, "coverage": coverage, "se": se, "width": width, "infinite": infinite}


def worst_group(coverage: ArrayLike, count: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""The group of lowest coverage at each level: :math:`g^*_k = \arg\min_g \hat c_{gk}`.

    Ties go to the larger group (its shortfall is the better measured one),
    then to the first label.

    Parameters
    ----------
    coverage : array_like, shape (G, k)
    count : array_like of int, shape (G,)

    Returns
    -------
    index : ndarray of int, shape (k,)
        Row of the worst group per level.
    value : ndarray, shape (k,)
        Its coverage :math:`\min_g \hat c_{gk}`.

    References
    ----------
    Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J. (2023).
    Class-conditional conformal prediction with many classes. NeurIPS.

    Examples
    --------
    >>> from calibprob.metrics import worst_group
    >>> idx, val = worst_group([[0.9], [0.5], [0.5]], [10, 4, 8])
    >>> idx.tolist(), val.tolist()
    ([2], [0.5])
    """
    cov = _as_2d(np.asarray(coverage, float), "coverage")
    n = np.asarray(count)
    idx = np.empty(cov.shape[1], dtype=np.int64)
    for k in range(cov.shape[1]):
        # lexsort: last key is primary (coverage ascending), then count descending, then position
        idx[k] = np.lexsort((np.arange(n.size), -n, cov[:, k]))[0]
    return idx, cov[idx, np.arange(cov.shape[1])]


def coverage_gap(
    covered: ArrayLike, groups: ArrayLike, confidence_levels: ArrayLike, *, weighted: bool = False
) -> np.ndarray:
    r"""Coverage gap across groups (Ding et al. 2023), one value per level.

    .. math::

        \mathrm{CovGap}_k = \frac{1}{G}\sum_{g} \bigl|\hat c_{gk} - (1-\alpha_k)\bigr|,
        \qquad
        \mathrm{CovGap}^{w}_k = \sum_{g} \frac{n_g}{n}\bigl|\hat c_{gk} - (1-\alpha_k)\bigr|

    over the non-empty groups; :math:`1-\alpha_k` is the nominal level.

    Parameters
    ----------
    covered : array_like of bool, shape (n, k)
    groups : array_like, shape (n,)
        Any labels (MAPIE requires integers; the value does not depend on them).
    confidence_levels : array_like, shape (k,)
    weighted : bool, default False
        Weight each group by its share of the points.

    Returns
    -------
    ndarray, shape (k,)

    References
    ----------
    Ding, T., Angelopoulos, A. N., Bates, S., Jordan, M. I. and Tibshirani, R. J. (2023).
    Class-conditional conformal prediction with many classes. NeurIPS (CovGap).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import coverage_gap
    >>> c = np.array([[1], [1], [0], [1]], bool)          # group a: 1.0, group b: 0.5
    >>> coverage_gap(c, [0, 0, 1, 1], [0.9]).round(6).tolist()   # (0.1 + 0.4) / 2
    [0.25]
    """
    cov = _as_2d(np.asarray(covered, bool), "covered")
    levels = np.atleast_1d(np.asarray(confidence_levels, float))
    r = coverage_by_group(cov, np.zeros(cov.shape), groups)
    gaps = np.abs(r["coverage"] - levels[None, :])
    if weighted:
        return np.sum(r["count"][:, None] / cov.shape[0] * gaps, axis=0)
    return np.mean(gaps, axis=0)


def size_stratified_coverage(covered: ArrayLike, widths: ArrayLike, num_bins: int = 3) -> np.ndarray:
    r"""Coverage within bins of interval width (size-stratified coverage, SSC).

    At each level the points are sorted by width (``np.argsort``, as MAPIE's
    ``regression_ssc``) and split with ``np.array_split`` into ``num_bins``
    near-equal bins :math:`B_1, \dots, B_b` (narrowest first):

    .. math::

        \mathrm{SSC}_{kj} = \frac{1}{|B_j|}\sum_{i \in B_j} c_{ik}

    A method whose coverage holds only on average is often short in its
    narrowest bin; :math:`\min_j \mathrm{SSC}_{kj}` is MAPIE's
    ``regression_ssc_score``. Infinite widths sort last.

    Parameters
    ----------
    covered : array_like of bool, shape (n, k)
    widths : array_like, shape (n, k)
    num_bins : int, default 3
        At most the number of points.

    Returns
    -------
    ndarray, shape (k, num_bins)
        MAPIE's layout (levels first). NaN at a level with fewer distinct
        widths than bins (e.g. a constant-width interval), where MAPIE raises:
        ties would be split between bins in an arbitrary order.

    Raises
    ------
    ValueError
        If ``num_bins`` is not a positive integer at most ``n``.

    References
    ----------
    Angelopoulos, A. N. and Bates, S. (2021). A gentle introduction to conformal
    prediction and distribution-free uncertainty quantification, §3.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import size_stratified_coverage
    >>> c = np.array([0, 1, 1, 1], bool)[:, None]
    >>> size_stratified_coverage(c, np.array([1.0, 2.0, 3.0, 4.0])[:, None], 2).tolist()
    [[0.5, 1.0]]
    """
    cov = _as_2d(np.asarray(covered, bool), "covered")
    w = _as_2d(np.asarray(widths, float), "widths")
    n = cov.shape[0]
    if isinstance(num_bins, bool) or not isinstance(num_bins, int | np.integer) or not 1 <= num_bins <= n:
        raise ValueError(
            f"num_bins must be an integer between 1 and the number of observations ({n}); got {num_bins!r}. "
            "Pass fewer bins (MAPIE's default is 3)."
        )
    order = np.argsort(w, axis=0)
    out = np.empty((cov.shape[1], num_bins))
    for j, idx in enumerate(np.array_split(order, num_bins, axis=0)):
        out[:, j] = np.mean(np.take_along_axis(cov, idx, axis=0), axis=0)
    # fewer distinct widths than bins (a constant-width interval): the bins would split ties in
    # an arbitrary order, so the level has no size-stratified coverage (MAPIE raises instead)
    distinct = np.array([np.unique(w[:, k]).size for k in range(w.shape[1])])
    out[distinct < num_bins] = np.nan
    return out


def _slab_scan(z: np.ndarray, c: np.ndarray, delta: float) -> tuple[float, float, float]:
    """Lowest coverage over windows of sorted projections with at least m = ceil(delta n) points: (coverage, a, b).

    The windows of covmetrics' ``wsc_all_numpy`` (from Feldman et al.'s oqr code): every run of
    at least m consecutive sorted points. Only lengths m..2m-1 are scanned: a longer window splits
    into two of at least m points, one of which covers no more than the whole, so the minimum is
    the same (exactly: each value is an integer count over a length) at O(n m) cost instead of
    O(n^2). Ties go to the first start, then the shortest window. ``a``, ``b`` are the window's
    first and last projections (covmetrics returns the one before the last as ``b``).
    """
    n = z.size
    order = np.argsort(z, kind="stable")
    zs, cs = z[order], np.concatenate([[0.0], np.cumsum(c[order], dtype=float)])
    m = _min_slab_points(delta, n)
    lengths = np.arange(m, min(2 * m - 1, n) + 1)[:, None]
    starts = np.arange(n - m + 1)[None, :]
    ends = starts + lengths  # one past the last point
    ok = ends <= n
    cov = np.where(ok, (cs[np.minimum(ends, n)] - cs[starts]) / lengths, np.inf)
    # first start, then shortest length, among the minima (a-major order)
    flat = int(np.argmin(cov.T))
    start, k = divmod(flat, lengths.size)
    return float(cov[k, start]), float(zs[start]), float(zs[start + int(lengths[k, 0]) - 1])


def _min_slab_points(delta: float, n: int) -> int:
    """m = ceil(delta n), in exact decimal arithmetic (covmetrics' float ceil gives 8 for 0.7 x 10)."""
    return max(1, min(n, -(-Fraction(str(delta)) * n // 1)))


def _standardise(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit sd (a constant column is only centred): WSC is not scale-free."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _directions(n_directions: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n_directions`` uniform directions on the unit sphere of R^d (normalised Gaussians), one per row."""
    v = rng.standard_normal((n_directions, d))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def worst_slab_coverage(
    X: ArrayLike,
    covered: ArrayLike,
    *,
    delta: float = 0.1,
    n_directions: int = 1000,
    find_fraction: float | None = 0.25,
    seed: int = 0,
    max_n: int = WSC_MAX_N,
    directions: ArrayLike | None = None,
) -> np.ndarray:
    r"""Worst-slab coverage (Cauchois, Gupta & Duchi 2021), one value per level.

    A slab is :math:`S_{v,a,b} = \{x : a \le v^\top x \le b\}` for a unit
    direction :math:`v`; the worst-slab coverage is

    .. math::

        \mathrm{WSC}_k = \min_{v \in V}\ \min_{a<b:\ \hat P(S_{v,a,b}) \ge \delta}
        \hat P(c_k = 1 \mid X \in S_{v,a,b})

    over ``n_directions`` random directions :math:`V` (normalised Gaussians,
    seeded), on standardised ``X`` (the slab family is not scale-invariant).
    For each direction every window of the sorted projections holding at
    least :math:`\lceil \delta n \rceil` points is scanned, as covmetrics'
    ``WSC`` (which MAPIE calls) does.

    **Split.** Chosen and evaluated on the same points the minimum is biased
    low (it picks the noise). With ``find_fraction`` = φ (default 0.25, as
    Romano, Sesia & Candès 2020's ``wsc_unbiased`` with ``test_size=0.75``) a
    seeded random φ of the points finds the slab :math:`(v^*, a^*, b^*)` and
    the coverage is measured on the other 1 − φ, which are independent of that
    choice. ``find_fraction=None`` is the in-sample estimate (MAPIE's and
    covmetrics' ``WSC``).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Features, finite.
    covered : array_like of bool, shape (n, k)
    delta : float, default 0.1
        Smallest slab mass, in (0, 1].
    n_directions : int, default 1000
    find_fraction : float in (0, 1) or None, default 0.25
    seed : int, default 0
        Seeds the directions, the split and any subsample.
    max_n : int, default ``WSC_MAX_N``
        The slab-finding points are subsampled to this many (with a warning).
    directions : array_like, shape (M, d), optional
        Explicit directions (normalised here) instead of random ones.

    Returns
    -------
    ndarray, shape (k,)
        The split estimate is NaN where the chosen slab holds none of the
        evaluation points (it cannot be measured there).

    Raises
    ------
    ValueError
        If ``X`` is not 2-D with one row per observation, holds NaN/inf, or
        ``directions`` have another width than ``X``.

    Notes
    -----
    Cost: O(M n_f m) operations and O(n_f m) memory per direction, n_f the
    slab-finding points (≤ ``max_n``) and m = ⌈δ n_f⌉ (only windows of m to
    2m - 1 points need scanning; the minimum is the same); covmetrics' scan is
    O(M n_f^2).

    References
    ----------
    Cauchois, M., Gupta, S. and Duchi, J. C. (2021). Knowing what you know: valid and
    validated confidence sets in multiclass and multilabel prediction. JMLR 22(81).

    Romano, Y., Sesia, M. and Candès, E. J. (2020). Classification with valid and
    adaptive coverage. NeurIPS (the split estimate).

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import worst_slab_coverage
    >>> X = np.linspace(-1, 1, 200)[:, None]
    >>> c = (X[:, 0] < 0.5)[:, None]            # coverage fails for x > 0.5 (a quarter of the points)
    >>> float(worst_slab_coverage(X, c, delta=0.2, n_directions=4, find_fraction=None)[0])
    0.0
    """
    cov = _as_2d(np.asarray(covered, bool), "covered")
    Xs = _standardise(_check_slab_X(X, cov.shape[0]))
    delta = _check_delta(delta)
    rng = np.random.default_rng(seed)
    V = _directions(n_directions, Xs.shape[1], rng) if directions is None else _check_directions(directions, Xs)
    n = cov.shape[0]
    if find_fraction is None:
        find, evaluate = np.arange(n), None
    else:
        perm = rng.permutation(n)
        n_find = min(max(int(np.ceil(find_fraction * n)), 1), n - 1)
        find, evaluate = np.sort(perm[:n_find]), np.sort(perm[n_find:])
    if find.size > max_n:
        warnings.warn(
            f"worst_slab_coverage: {find.size} slab-finding points > max_n={max_n}; a seeded subsample of "
            f"{max_n} finds the slab (the scan is O(n_directions n^2)). Raise max_n to use them all.",
            stacklevel=2,
        )
        find = np.sort(rng.choice(find, max_n, replace=False))
    out = np.empty(cov.shape[1])
    for k in range(cov.shape[1]):
        best = min((_slab_scan(Xs[find] @ v, cov[find, k], delta) + (j,) for j, v in enumerate(V)), key=lambda t: t[0])
        if evaluate is None:
            out[k] = best[0]
            continue
        z = Xs[evaluate] @ V[best[3]]
        inside = (z >= best[1]) & (z <= best[2])
        out[k] = cov[evaluate, k][inside].mean() if inside.any() else np.nan
    return out


def _check_slab_X(X: ArrayLike, n: int) -> np.ndarray:
    arr = np.asarray(X, dtype=float) if not hasattr(X, "values") else np.asarray(X.values, dtype=float)
    if arr.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_obs, n_features) for worst-slab coverage; got shape {arr.shape}. "
            "For a single feature pass X.reshape(-1, 1)."
        )
    if arr.shape[0] != n:
        raise ValueError(f"X has {arr.shape[0]} rows but there are {n} observations. Pass one row per observation.")
    if arr.shape[1] < 1:
        raise ValueError("X has 0 columns; worst-slab coverage needs at least one feature.")
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(t) for t in np.argwhere(bad)[0])
        raise ValueError(
            f"X must be finite; got {int(bad.sum())} NaN/inf value(s), the first at row {i}, column {j}. "
            "Drop or impute missing features before calling."
        )
    return arr


def _check_delta(delta: object) -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.floating) or not 0 < float(delta) <= 1:
        raise ValueError(f"delta must be a slab mass in (0, 1]; got {delta!r}. MAPIE's default is 0.1.")
    return float(delta)


def _check_directions(directions: ArrayLike, Xs: np.ndarray) -> np.ndarray:
    V = np.atleast_2d(np.asarray(directions, dtype=float))
    if V.ndim != 2 or V.shape[1] != Xs.shape[1]:
        raise ValueError(
            f"directions must have shape (n_directions, {Xs.shape[1]}) to match X's {Xs.shape[1]} columns; "
            f"got shape {V.shape}. Give X and directions the same features."
        )
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    if not np.all(np.isfinite(V)) or np.any(norms == 0):
        raise ValueError("directions must be finite and non-zero; drop the zero rows.")
    return V / norms


def hsic(
    covered: ArrayLike,
    widths: ArrayLike,
    *,
    kernel_sizes: tuple[float, ...] = (1.0, 1.0),
    max_n: int = HSIC_MAX_N,
    seed: int = 0,
) -> np.ndarray:
    r"""Hilbert-Schmidt independence criterion between coverage and width, one value per level.

    With Gaussian kernels in MAPIE's convention (the squared distance divided
    by the kernel size :math:`k`, not by :math:`2\sigma^2`),
    :math:`K_{ij} = \exp(-(w_i - w_j)^2 / k_1)`,
    :math:`L_{ij} = \exp(-(c_i - c_j)^2 / k_2)` and
    :math:`H = I - \mathbf 1\mathbf 1^\top / n`:

    .. math::

        \mathrm{HSIC}_k = \sqrt{\operatorname{tr}(L H K H)}\,/\,(n - 1)

    0 when coverage does not depend on width (Feldman, Bates & Romano 2021).
    Two infinite widths are at distance 0, an infinite and a finite one at
    distance ∞ (:math:`K = 0`), so unbounded intervals give no NaN.

    Parameters
    ----------
    covered : array_like of bool, shape (n, k)
    widths : array_like, shape (n, k)
    kernel_sizes : (float, float), default (1, 1)
        :math:`(k_1, k_2)`, positive.
    max_n : int, default ``HSIC_MAX_N``
        Above this many points a seeded subsample of ``max_n`` is used, with
        a warning (memory is 16 n² bytes).
    seed : int, default 0

    Returns
    -------
    ndarray, shape (k,)

    Raises
    ------
    ValueError
        If a kernel size is not positive.

    References
    ----------
    Feldman, S., Bates, S. and Romano, Y. (2021). Improving conditional coverage via
    orthogonal quantile regression. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.metrics import hsic
    >>> c = np.array([1, 1, 1, 1], bool)[:, None]      # constant coverage: independent of width
    >>> hsic(c, np.arange(4.0)[:, None]).tolist()
    [0.0]
    """
    cov = _as_2d(np.asarray(covered, bool), "covered")
    w = _as_2d(np.asarray(widths, float), "widths")
    ks = np.asarray(kernel_sizes, float)
    if ks.shape != (2,) or not np.all(ks > 0):
        raise ValueError(f"kernel_sizes must be two positive numbers (k_width, k_coverage); got {kernel_sizes!r}.")
    n = cov.shape[0]
    if n > max_n:
        warnings.warn(
            f"hsic: {n} observations > max_n={max_n}; a seeded subsample of {max_n} is used "
            f"(the kernel matrices take 16 n^2 bytes). Raise max_n to use them all.",
            stacklevel=2,
        )
        idx = np.sort(np.random.default_rng(seed).choice(n, max_n, replace=False))
        cov, w, n = cov[idx], w[idx], max_n
    out = np.empty(cov.shape[1])
    for k in range(cov.shape[1]):
        wk = w[:, k]
        both_inf = np.isinf(wk)[:, None] & np.isinf(wk)[None, :]
        with np.errstate(invalid="ignore"):
            d = np.where(both_inf, 0.0, wk[:, None] - wk[None, :])
        with np.errstate(over="ignore"):  # a huge distance gives kernel 0, as it should
            K = np.exp(-(d**2) / ks[0])
        ck = cov[:, k].astype(float)
        L = np.exp(-((ck[:, None] - ck[None, :]) ** 2) / ks[1])
        # tr(L H K H) = sum_ij L_ij (HKH)_ij, HKH the doubly centred K (both symmetric)
        Kc = K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()
        out[k] = np.sqrt(max(float(np.sum(L * Kc)), 0.0)) / (n - 1)
    return out
