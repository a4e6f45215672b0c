r"""Synthetic test functions with their textbook definitions, domains and global minima.

Every function is a :class:`TestFunction`: vectorised over the rows of
``X (n, d)``, with its box domain ``bounds (d, 2)``, its global minimum value on
that box and the minimiser(s). Definitions follow Surjanovic & Bingham's
*Virtual Library of Simulation Experiments* (the "textbook" versions), not the
variants found in some BO packages (GPyOpt's ``beale`` is a negated Rosenbrock,
its ``dropwave`` is sign-flipped and its Alpine has no absolute value).
All functions are to be **minimised**.

======================= ===== ============================== ==================== ==============================
name                    d     domain                         global minimum       minimiser(s)
======================= ===== ============================== ==================== ==============================
branin                  2     [-5, 10] x [0, 15]             0.397887357729738    (-pi, 12.275), (pi, 2.275),
                                                                                  (3 pi, 2.475)
goldstein_price         2     [-2, 2]^2                      3                    (0, -1)
hartmann4               4     [0, 1]^4                       -3.134494141222      (0.18740, 0.19415, 0.55792,
                                                                                  0.26478)
hartmann6               6     [0, 1]^6                       -3.322368011415      (0.20169, 0.15001, 0.47687,
                                                                                  0.27533, 0.31165, 0.65730)
park                    4     [0, 1]^4                       2/3                  (0, 0, 0, t), any t in [0, 1]
forrester               1     [0, 1]                         -6.020740055767      0.757248757
ackley                  any   [-32.768, 32.768]^d            0                    0
alpine                  any   [-10, 10]^d                    0                    0 (and others)
six_hump_camel          2     [-2, 2] x [-1, 1]              -1.031628453490      (0.0898, -0.7127), (-0.0898,
                                                                                  0.7127)
cosines                 2     [0, 1]^2                       -1.6                 (0.3125, 0.3125)
beale                   2     [-4.5, 4.5]^2                  0                    (3, 0.5)
mccormick               2     [-1.5, 4] x [-3, 4]            -sqrt(3)/2 - pi/3    (1/2 - pi/3, -1/2 - pi/3)
powers                  any   [-1, 1]^d                      0                    0
cross_in_tray           2     [-10, 10]^2                    -2.062611870823      (+-1.349407, +-1.349407)
dropwave                2     [-5.12, 5.12]^2                -1                   (0, 0)
rosenbrock              any   [-5, 10]^d                     0                    (1, ..., 1)
======================= ===== ============================== ==================== ==============================

Conventions where sources differ:

- **cosines** is written for minimisation, :math:`f = \sum_i (u_i^2 - 0.3\cos 3\pi u_i) - 1`,
  the negative of the maximisation form :math:`1 - \sum_i (g(u_i) - r(u_i))`
  (GPyOpt also returns the negative; Deshpande et al. report minima near −1.598).
  The minimum −1.6 is at :math:`u = 0`, i.e. :math:`x_i = 0.3125`.
- **hartmann4** is Picheny et al.'s rescaled version used by Pion & Vazquez,
  :math:`(1.1 - \sum)/0.839` with the first four columns of the Hartmann-6
  constants and :math:`\alpha = (1, 1.2, 3, 3.2)` (some sources write 0.8387).
  The raw sum reaches 3.7298406 at the minimiser.
- **six_hump_camel** uses the box [−2, 2] × [−1, 1] of GPyOpt and Deshpande
  et al.; the library's wider box [−3, 3] × [−2, 2] has the same minimum and
  minimisers (use ``dataclasses.replace(fn, bounds=...)`` for it).
- **park** (park91b) attains its minimum 2/3 on the whole segment
  :math:`x_1 = x_2 = x_3 = 0`, since :math:`\partial f/\partial x_3 = 1 - x_4 \cos x_3 \ge 0`.

The minima without a closed form (Hartmann 4 and 6, six-hump camel,
Forrester, cross-in-tray) were computed by multi-start L-BFGS-B polished with
Nelder–Mead; ``tests/datasets/test_functions.py`` checks that a seeded random search
plus multi-start local optimisation never goes below them.

References
----------
Surjanovic, S. and Bingham, D. Virtual Library of Simulation Experiments: Test
Functions and Datasets. https://www.sfu.ca/~ssurjano (retrieved 2022).

Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
prediction: methods and comparative analysis (Branin, Goldstein-Price,
Hartmann 4 and 6, Park).

Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS (Forrester,
Ackley, Alpine, six-hump camel, cosines, Beale, McCormick, powers,
cross-in-tray, dropwave).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.validation import check_choice, check_int
from calibprob.datasets._function_table import _SFU, _SPECS

__all__ = [
    "TestFunction",
    "get_function",
    "available_functions",
    "list_functions",
    "sample_design",
    "make_synthetic",
]


@dataclass(frozen=True, eq=False)
class TestFunction:
    """A synthetic function to minimise on a box, with its known global minimum.

    Parameters
    ----------
    name : str
        Canonical name (a key of :func:`get_function`).
    dim : int
        Input dimension d.
    bounds : ndarray, shape (d, 2)
        Lower and upper bound of each coordinate.
    f : callable
        Vectorised implementation, ``(n, d) -> (n,)``.
    minimum : float
        Global minimum value on ``bounds``.
    minimizers : ndarray, shape (k, d)
        Known global minimiser(s) (a representative when there is a continuum).
    formula : str
        The definition, as LaTeX.
    reference : str
        Where the definition comes from.

    Notes
    -----
    Calling the object validates the input: ``fn(X)`` with ``X`` of shape
    ``(n, d)`` returns shape ``(n,)``; with shape ``(d,)`` it returns a float.

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    Examples
    --------
    >>> import numpy as np
    >>> from calibprob.datasets import get_function
    >>> fn = get_function("forrester")
    >>> fn.dim, fn.bounds.tolist(), round(fn.minimum, 4)
    (1, [[0.0, 1.0]], -6.0207)
    >>> fn(np.array([[0.0], [1.0]])).round(4).tolist()
    [3.0272, 15.8297]
    """

    __test__ = False  # not a pytest test class, despite its name

    name: str
    dim: int
    bounds: np.ndarray
    f: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    minimum: float
    minimizers: np.ndarray = field(repr=False)
    formula: str = field(default="", repr=False)
    reference: str = field(default="", repr=False)

    def __call__(self, X: ArrayLike) -> np.ndarray | float:
        X = np.asarray(X, dtype=float)
        single = X.ndim == 1
        if single:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(
                f"X must have shape (n, {self.dim}) or ({self.dim},) for {self.name} (d={self.dim}); "
                f"got shape {np.shape(X) if not single else X.shape[1:]}."
            )
        out = np.asarray(self.f(X), dtype=float)
        return float(out[0]) if single else out

    @property
    def lower(self) -> np.ndarray:
        """Lower bounds, shape (d,)."""
        return self.bounds[:, 0]

    @property
    def upper(self) -> np.ndarray:
        """Upper bounds, shape (d,)."""
        return self.bounds[:, 1]


def _key(name: str) -> str:
    # "Six-hump camel", "six_hump_camel" and "SixHumpCamel" all name the same function
    return re.sub(r"[^a-z0-9]", "", name.lower())


_LOOKUP: dict[str, str] = {}
for _s in _SPECS.values():
    for _n in (_s.name, *_s.aliases):
        _LOOKUP[_key(_n)] = _s.name


def available_functions() -> tuple[str, ...]:
    """Every name :func:`get_function` lists (canonical names and aliases), sorted.

    Spelling is lenient: case, spaces, hyphens and underscores are ignored.

    Returns
    -------
    tuple of str

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    Examples
    --------
    >>> from calibprob.datasets import available_functions
    >>> {"branin", "forrester", "hartmann6"} <= set(available_functions())
    True
    """
    return tuple(sorted({n for s in _SPECS.values() for n in (s.name, *s.aliases)}))


def list_functions() -> pd.DataFrame:
    """A table of the test functions.

    Returns
    -------
    pandas.DataFrame
        Columns ``name``, ``dim`` ("any" for d-dimensional ones), ``bounds``,
        ``minimum``, ``aliases``.

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    Examples
    --------
    >>> from calibprob.datasets import list_functions
    >>> table = list_functions()
    >>> table.columns.tolist()
    ['name', 'dim', 'bounds', 'minimum', 'aliases']
    >>> table.set_index("name").loc["branin", "dim"]
    2
    """
    rows = []
    for s in _SPECS.values():
        fn = get_function(s.name)
        rows.append(
            {
                "name": s.name,
                "dim": "any" if s.dim is None else s.dim,
                "bounds": "x".join(f"[{lo:g}, {hi:g}]" for lo, hi in fn.bounds)
                if s.dim is not None
                else f"[{s.box[0]:g}, {s.box[1]:g}]^d",
                "minimum": fn.minimum,
                "aliases": ", ".join(s.aliases),
            }
        )
    return pd.DataFrame(rows)


def get_function(name: str, dim: int | None = None) -> TestFunction:
    """Look up a test function by name.

    Parameters
    ----------
    name : str
        One of :func:`available_functions` (case, spaces, hyphens and
        underscores ignored), e.g. ``"branin"``, ``"Six-hump camel"``.
    dim : int, optional
        Input dimension of the d-dimensional functions (ackley, alpine, powers,
        rosenbrock; default 2). For fixed-dimension functions it must be None
        or equal to their dimension.

    Returns
    -------
    TestFunction

    Raises
    ------
    ValueError
        If the name is unknown (the message lists the valid names) or ``dim``
        does not fit the function.

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    Examples
    --------
    >>> fn = get_function("branin")
    >>> round(float(fn(fn.minimizers)[0]), 6)
    0.397887
    """
    key = _key(name) if isinstance(name, str) else None
    if key not in _LOOKUP:
        raise ValueError(
            f"name must be a known test function; got {name!r}. Valid names: "
            f"{', '.join(_SPECS)} (aliases: "
            f"{', '.join(a for s in _SPECS.values() for a in s.aliases)})."
        )
    spec = _SPECS[_LOOKUP[key]]
    if spec.dim is None:
        d = 2 if dim is None else check_int(dim, "dim", minimum=spec.min_dim)
        bounds = np.tile(np.asarray(spec.box, dtype=float), (d, 1))
        f = spec.f
    else:
        if dim is not None and check_int(dim, "dim") != spec.dim:
            raise ValueError(
                f"dim must be {spec.dim} (or None) for {spec.name}, which is "
                f"{spec.dim}-dimensional; got {dim}. Only ackley, alpine, powers and "
                "rosenbrock take any dimension."
            )
        d = spec.dim
        bounds = np.asarray(spec.box, dtype=float)
        f = spec.f
    minimum = spec.minimum(d) if callable(spec.minimum) else spec.minimum
    bounds.setflags(write=False)
    minimizers = np.asarray(spec.minimizers(d), dtype=float)
    minimizers.setflags(write=False)
    return TestFunction(
        name=spec.name,
        dim=d,
        bounds=bounds,
        f=f,
        minimum=float(minimum),
        minimizers=minimizers,
        formula=spec.formula,
        reference=_SFU,
    )


def _as_function(fn: Any, dim: int | None = None) -> TestFunction:
    if isinstance(fn, TestFunction):
        if dim is not None and dim != fn.dim:
            raise ValueError(f"dim must be None or {fn.dim} for this TestFunction; got {dim}.")
        return fn
    return get_function(fn, dim)


def sample_design(fn: Any, n: int, *, seed: Any, method: str = "uniform", dim: int | None = None) -> np.ndarray:
    """Sample n input points in the box domain of a test function.

    Parameters
    ----------
    fn : TestFunction or str
        The function (or its name, looked up with :func:`get_function`).
    n : int
        Number of points, at least 1.
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        Seed, so designs are reproducible.
    method : {"uniform", "lhs", "sobol"}, default "uniform"
        Independent uniform draws, a Latin hypercube, or a scrambled Sobol'
        sequence (scipy.stats.qmc), each mapped linearly onto the box.
    dim : int, optional
        Dimension, when ``fn`` is the name of a d-dimensional function.

    Returns
    -------
    ndarray, shape (n, d)

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    McKay, M. D., Beckman, R. J. and Conover, W. J. (1979). A comparison of three
    methods for selecting values of input variables in the analysis of output
    from a computer code. Technometrics 21(2) (Latin hypercube).

    Examples
    --------
    >>> from calibprob.datasets import sample_design
    >>> X = sample_design("branin", 8, seed=0, method="lhs")
    >>> X.shape, bool(((X >= [-5.0, 0.0]) & (X <= [10.0, 15.0])).all())
    ((8, 2), True)
    """
    fn = _as_function(fn, dim)
    n = check_int(n, "n", minimum=1)
    check_choice(method, "method", ("uniform", "lhs", "sobol"))
    rng = np.random.default_rng(seed)
    if method == "uniform":
        U = rng.random((n, fn.dim))
    else:
        # scipy.stats takes longer to import than calibprob itself; only these two designs need it
        from scipy.stats import qmc

        engine = (
            qmc.LatinHypercube(d=fn.dim, rng=rng) if method == "lhs" else qmc.Sobol(d=fn.dim, scramble=True, rng=rng)
        )
        if method == "sobol":
            with warnings.catch_warnings():
                # Sobol' balance needs powers of two; any n is still a valid design
                warnings.filterwarnings("ignore", message=".*balance properties.*")
                U = engine.random(n)
        else:
            U = engine.random(n)
    return fn.lower + U * (fn.upper - fn.lower)


def make_synthetic(
    fn_name: Any,
    n: int,
    *,
    noise: float = 0.0,
    seed: Any,
    dim: int | None = None,
    design: str = "uniform",
) -> xr.Dataset:
    r"""A regression data set from a test function: :math:`y_i = f(x_i) + \varepsilon_i`.

    Parameters
    ----------
    fn_name : str or TestFunction
        The test function (see :func:`available_functions`).
    n : int
        Number of observations.
    noise : float, default 0.0
        Standard deviation of the Gaussian noise :math:`\varepsilon_i \sim N(0, \text{noise}^2)`.
    seed : int, numpy.random.SeedSequence or numpy.random.Generator
        One seed for both the design and the noise.
    dim : int, optional
        Dimension of the d-dimensional functions.
    design : {"uniform", "lhs", "sobol"}, default "uniform"
        How the inputs are sampled (see :func:`sample_design`).

    Returns
    -------
    xarray.Dataset
        The layout of :func:`~calibprob.datasets.load_dataset`: ``X(obs, feature)``
        (features ``x1..xd``), ``y(obs)``, plus ``f(obs)``, the noise-free values;
        attributes ``name``, ``description``, ``target``, ``source``, ``license``,
        ``function``, ``noise``, ``minimum``, ``design``.

    References
    ----------
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets. https://www.sfu.ca/~ssurjano.

    Pion, A. and Vazquez, E. (2024). Gaussian process interpolation with conformal
    prediction: methods and comparative analysis, §4 (noise-free designs on test functions).

    Examples
    --------
    >>> from calibprob.datasets import make_synthetic
    >>> data = make_synthetic("branin", 50, noise=0.1, seed=0)
    >>> dict(data["X"].sizes), float(data.attrs["noise"])
    ({'obs': 50, 'feature': 2}, 0.1)
    """
    fn = _as_function(fn_name, dim)
    noise = float(noise)
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be >= 0 (a noise standard deviation); got {noise}. Pass 0 for noise-free data.")
    ss = np.random.SeedSequence(seed) if not isinstance(seed, np.random.Generator) else None
    if ss is not None:
        design_seed, noise_seed = ss.spawn(2)
        noise_rng = np.random.default_rng(noise_seed)
    else:
        design_seed, noise_rng = seed, seed
    X = sample_design(fn, n, seed=design_seed, method=design)
    f = np.asarray(fn(X), dtype=float)
    y = f + noise * noise_rng.standard_normal(X.shape[0]) if noise > 0 else f.copy()
    source = f"synthetic: {fn.name} (d={fn.dim}), {fn.reference}"
    return xr.Dataset(
        {
            "X": (("obs", "feature"), X, {"long_name": "features"}),
            "y": (("obs",), y, {"long_name": "y", "target": "y", "source": source, "license": "n/a (synthetic)"}),
            "f": (("obs",), f, {"long_name": f"noise-free {fn.name}"}),
        },
        coords={"obs": np.arange(X.shape[0]), "feature": np.array([f"x{j + 1}" for j in range(fn.dim)], dtype=object)},
        attrs={
            "name": fn.name,
            "description": (
                f"{fn.name} test function (d={fn.dim}) on {n} {design} design points with "
                f"Gaussian noise sd {noise:g}; global minimum {fn.minimum:.10g}. f(x) = {fn.formula}"
            ),
            "target": "y",
            "source": source,
            "origin": "calibprob.datasets.make_synthetic",
            "license": "n/a (synthetic)",
            "function": fn.name,
            "noise": noise,
            "minimum": fn.minimum,
            "design": design,
        },
    )
