r"""The PyMC door to conformal Bayes: :func:`conformal_bayes` (PyMC is imported on use).

For a PyMC model whose inputs are ``pm.Data`` containers, the test log densities
:math:`\log f_{\theta_s}(y_g \mid x_j)` on the candidate grid are computed from the posterior
draws in bounded memory, blocked over test points and draws:

* **closed form** (``method="closed-form"``; Normal and Student-t likelihoods): the likelihood's
  parameters at the new inputs, per draw, from one vectorised PyTensor function of the
  posterior values (:math:`S \times m` numbers), then the log density in NumPy over the grid;
* **PyMC's log-probability** (``method="logp"``; any likelihood PyMC can score): the inputs are
  repeated once per grid value and the observed container holds the grid, and the model's own
  elementwise ``logp`` of the observed variable is evaluated for a batch of draws at a time
  (the same quantity :func:`pymc.compute_log_likelihood` computes, vectorised over draws).

Both run on a transform-free clone of the model (:func:`pymc.model.transform.conditioning.
remove_value_transforms`, as ``compute_log_likelihood`` does), so the user's model and its data
are left as they were.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import xarray as xr
from scipy import special

from calibprob._core.deprecation import warn_renamed
from calibprob._core.pytensor_setup import get_compile_mode
from calibprob._core.validation import check_choice, check_int
from calibprob.calibrators.conformal.bayes import _bambi, _grid, _inputs
from calibprob.calibrators.conformal.bayes.estimator import ConformalBayes, balanced_block

__all__ = ["conformal_bayes"]

#: Bytes a block of test log densities (draws x test points x grid) may take.
_BLOCK_BYTES = 64 * 2**20
#: PyTensor mode of the ``logp`` path's log density when the caller sets none (compiled once per model).
_LOGP_MODE = "NUMBA"
_CLOSED_FORM = {"NormalRV": ("mu", "sigma"), "StudentTRV": ("nu", "mu", "sigma")}


def conformal_bayes(
    model: Any,
    idata: Any,
    X_new: Any,
    *,
    confidence_level: Any = 0.9,
    groups: Any = None,
    groups_new: Any = None,
    grid: Any = None,
    n_grid: int = 100,
    var_name: str | None = None,
    method: str = "auto",
    compile_mode: Any = None,
    random_seed: int | None = 0,
    return_calibrator: bool = False,
    weights: Any = None,
    weights_new: Any = None,
    **options: Any,
) -> xr.Dataset | tuple[xr.Dataset, ConformalBayes]:
    r"""Conformal Bayes prediction sets for new inputs of a fitted PyMC model, in one call.

    Parameters
    ----------
    model : pymc.Model or bambi.Model
        A PyMC model, with its inputs in ``pm.Data`` containers and the observed variable's shape
        following them (``shape=X.shape[0]`` or dims tied to the data; the ``logp`` path also
        needs the observed values in a ``pm.Data`` container); or a fitted ``bambi.Model``
        (bambi >= 0.21), evaluated at the new rows through bambi's ``predict`` and
        ``compute_log_likelihood``.
    idata : xarray.DataTree
        Its posterior, with a ``log_likelihood`` group (``pm.compute_log_likelihood(idata)``)
        and ``observed_data``.
    X_new : dict, array_like or pandas.DataFrame
        New values of the input containers, ``{name: array}`` as for ``pm.set_data`` (every
        container indexed by observation, e.g. a group index too), or one array when the model
        has exactly one input container; for a bambi model, a DataFrame of new rows.
    confidence_level : float or sequence of float, default 0.9
    groups, groups_new : array_like or str, optional
        Grouped conformal Bayes (see :class:`calibprob.ConformalBayes`): ``groups`` are the training points'
        labels (its ``fit(groups=)``: labels or a coordinate name of ``observed_data``), ``groups_new`` those of
        the rows of ``X_new`` (its ``predict(groups=)``), named as ``X_new`` is. Read by the package's label
        reader (missing labels and ``1`` beside ``"1"`` refused); a labelled ``groups`` (Series, DataArray) is
        aligned to the log-likelihood's observation coordinate, and a labelled ``groups_new`` to ``X_new``'s row
        index when ``X_new`` is a DataFrame / Series (or a dict of them) with one; a mismatch is refused naming
        the first label, plain arrays are read by position. Before 0.2.0 these were ``train_groups=`` and
        ``groups=``: a call with ``train_groups=`` is read that way, with a ``FutureWarning``.
    grid : array_like, optional
        Equispaced candidates, shape (G,) or (m, G). Default: ``n_grid`` points per test point,
        placed by its own posterior predictive (so a test input far from the training data gets
        a grid where its set lies, never a refusal): with a Normal or Student-t likelihood, the
        union over draws of each draw's central :math:`1 - 10^{-3}` interval and the region where
        a candidate can rank inside a set; otherwise the range of one posterior predictive draw
        per posterior draw, widened by half of it on each side (a multivariate likelihood, which
        PyMC cannot draw one coordinate of, gets Fong and Holmes's
        :math:`[\min y - 2 s_y, \max y + 2 s_y]`). A test point whose set reaches its default
        grid's edge gets its grid tripled about its centre and is evaluated again (up to 3 times).
        ``attrs["grid_rule"]`` says which rule placed the grid. See
        ``calibprob.calibrators.conformal.bayes._grid``.
    n_grid : int, default 100
    var_name : str, optional
        The observed variable, when the model has several.
    method : {"auto", "closed-form", "logp"}, default "auto"
        ``auto``: closed form for Normal and Student-t likelihoods, PyMC's ``logp`` otherwise.
    compile_mode : str, optional
        PyTensor mode; default ``calibprob._core.pytensor_setup.get_compile_mode``, except the ``logp``
        path's log density, compiled with Numba (``"NUMBA"``, once per model; about 7x faster per
        block than the default's Python-level elementwise ops, measured) and in the default mode
        where Numba cannot compile the model's graph. Its values can differ from the default mode's
        in the last bit (a different ``log``); the ranks, integer counts, do not move but at exact ties.
    random_seed : int or None, default 0
        Seed of the posterior predictive draws that place the default grid on the ``logp`` path
        (fixed by default, so a call is reproducible; the sets' ends are refined on the exact
        p-value and move with the grid only within the refinement's tolerance).
    weights, weights_new : array_like or calibprob.weights.Weights, optional
        Weighted conformal Bayes under covariate shift (see :class:`calibprob.ConformalBayes`): ``weights`` are
        the training points' likelihood ratios :math:`w(x_i)` (its ``fit(weights=)``), ``weights_new`` those of
        the rows of ``X_new`` (its ``predict(weights=)``; default: the test weights of a ``weights`` object,
        e.g. a :class:`~calibprob.weights.LikelihoodRatio` fitted on the training and new inputs).
    return_calibrator : bool, default False
        Also return the fitted :class:`calibprob.ConformalBayes` (it holds the training
        log-likelihood: save it with its ``save`` method, or call its ``predict`` on other test
        log densities of the same draws).
    **options
        Other :class:`calibprob.ConformalBayes` parameters (``min_ess``, ``fallback``, ``chunk_size``, ``n_jobs``,
        ``progress``: a progress line over the test points, the model's log densities included, ...).

    Returns
    -------
    xarray.Dataset or (xarray.Dataset, ConformalBayes)
        As :meth:`calibprob.ConformalBayes.predict`, with ``attrs["log_density"]`` naming the path;
        with ``return_calibrator=True``, also the fitted calibrator.

    References
    ----------
    Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34.

    Examples
    --------
    >>> import numpy as np, pymc as pm, calibprob
    >>> rng = np.random.default_rng(0); x = rng.normal(size=40); y = 2 * x + rng.normal(size=40)
    >>> with pm.Model() as model:                                          # doctest: +SKIP
    ...     xd = pm.Data("x", x); yd = pm.Data("y", y)
    ...     b = pm.Normal("b", 0, 5); s = pm.HalfNormal("s", 2)
    ...     pm.Normal("obs", b * xd, s, observed=yd, shape=xd.shape[0])
    ...     idata = pm.sample(progressbar=False)
    ...     pm.compute_log_likelihood(idata, progressbar=False)
    >>> pred = calibprob.conformal_bayes(model, idata, {"x": [0.0, 1.0]})  # doctest: +SKIP
    """
    check_choice(method, "method", ("auto", "closed-form", "logp"))
    n_grid = check_int(n_grid, "n_grid", minimum=2)
    if random_seed is not None:  # checked before any work: it seeds the default grid's predictive draws
        random_seed = check_int(random_seed, "random_seed (a seed for the default grid's draws, e.g. 0)", minimum=0)
    groups, groups_new = _door_groups(groups, groups_new, options)
    cb = ConformalBayes(confidence_level=confidence_level, **options)
    door: _Door | _bambi.BambiDoor
    if _bambi.is_bambi_model(model):
        door = _bambi.BambiDoor(model, idata)
        var_name = door.var_name if var_name is None else var_name
    cb.fit(idata, var_name=var_name, groups=groups, weights=weights)
    if not _bambi.is_bambi_model(model):
        door = _Door(model, idata, var_name, compile_mode)
    # labelled test groups (a Series, a DataArray with a coordinate) follow X_new's row labels when it has them
    groups_new = _inputs.aligned(groups_new, _inputs.row_labels(X_new), "groups_new", "X_new")
    new = door.new_data(X_new)
    if door.n_draws != cb.n_draws_:
        raise ValueError(
            f"idata: the posterior has {door.n_draws} draws but the log_likelihood group {cb.n_draws_}; "
            "recompute it with pm.compute_log_likelihood(idata) on this posterior."
        )
    test_weights = cb._test_weights(weights_new, door.n_new(new))
    path = door.choose(method)
    log_density, g, rule = _density_and_grid(door, path, new, cb, grid, n_grid, random_seed)
    pred, widened = _predict_widening(
        cb, log_density, g, groups_new, door.n_draws, widen=grid is None, test_weights=test_weights
    )
    pred.attrs["log_density"] = path
    pred.attrs["grid_rule"] = rule + (_grid.EXTENDED.format(n=int(widened.sum())) if widened.any() else "")
    return (pred, cb) if return_calibrator else pred


def _density_and_grid(
    door: Any, path: str, new: Any, cb: ConformalBayes, grid: Any, n_grid: int, random_seed: Any
) -> Any:
    """The test log density ``f(rows, y) -> (S, b, K)``, the (m, G) grid and the grid's rule."""
    m = door.n_new(new)
    # each thread writes its blocks into one buffer of its own, reused block after block: a fresh array of a
    # block's size (tens of MB) is new pages from the kernel every time, and their first-touch faults cost
    # the closed-form pass three times its arithmetic (measured at the diabetes shape). The core consumes a
    # block before the thread asks for the next one, so a returned block is never overwritten while in use.
    buffers = _ThreadBuffers()
    if path == "closed-form":
        family, params = door.closed_form_params(new, m)
        density = _ClosedForm(family, params)

        def closed(rows: slice, y: np.ndarray) -> np.ndarray:
            return density(rows, y, buffers.get((door.n_draws, *y.shape)))

        closed.thread_safe = True  # type: ignore[attr-defined]  # see _EndRefiner: no lock needed
        g = _grid.default_grid(
            grid, cb.y_train_, n_grid, m, family=family, params=params, log_likelihood=cb.log_likelihood_
        )
        return closed, g, "given" if grid is not None else _grid.GRID_RULES["closed"]

    lock = threading.Lock()

    def logp(rows: slice, y: np.ndarray) -> np.ndarray:
        if not isinstance(door, _Door):  # bambi's blocks come as new arrays: gathered into one
            out = buffers.get((door.n_draws, *y.shape))
            with lock:  # the model's containers hold one block's data at a time
                for sl, v in door.logp_blocks(_rows(new, rows), y):
                    out[:, sl] = v
            return out
        out = buffers.get((door.n_draws, *y.shape))
        # each block is written in place, into its slice of out; the PyMC door's logp takes the data as inputs,
        # each thread with its own copy of the function: no lock
        for _ in door.logp_blocks(_rows(new, rows), y, out=out):
            pass
        return out

    logp.thread_safe = True  # type: ignore[attr-defined]  # bambi's containers under the lock, PyMC's as inputs

    draws = None if grid is not None else door.predictive_draws(new, m, random_seed)
    if draws is not None:
        return logp, _inputs.check_grid(_grid.grid_from_draws(draws, n_grid), m, n_grid), _grid.GRID_RULES["draws"]
    g = _grid.default_grid(grid, cb.y_train_, n_grid, m)
    return logp, g, "given" if grid is not None else _grid.GRID_RULES["training"]


def _door_groups(groups: Any, groups_new: Any, options: dict) -> Any:
    """``(training labels, X_new's labels)``, reading a 0.1 call (``train_groups=``, ``groups=`` the test rows').

    In 0.1 the door's ``groups=`` were the test rows' labels and ``train_groups=`` the training points'; 0.2.0
    names them as :class:`ConformalBayes` does (``fit(groups=)``) and as ``X_new`` is (``groups_new=``). A call
    with ``train_groups=`` is the 0.1 convention: it warns and is read as such (``options`` loses the key).
    """
    if "train_groups" not in options:
        return groups, groups_new
    if groups_new is not None:
        raise TypeError(
            "conformal_bayes() got train_groups= (0.1) and groups_new= (0.2.0) together; pass groups=<training "
            "labels>, groups_new=<X_new's labels>."
        )
    warn_renamed(
        "calibprob.conformal_bayes(train_groups=..., groups=...)",
        "train_groups",
        "groups",
        "calibprob.conformal_bayes(groups=<training labels>, groups_new=<X_new's labels>)",
        stacklevel=3,
    )
    return options.pop("train_groups"), groups


def _predict(
    cb: ConformalBayes,
    log_density: Any,
    g: np.ndarray,
    groups: Any,
    n_draws: int,
    test_weights: tuple[np.ndarray, Any] | None = None,
) -> xr.Dataset:
    """The core over blocks of test points, each block's log densities in bounded memory."""
    m = g.shape[0]
    per = max(1, _BLOCK_BYTES // (8 * n_draws * g.shape[1]))
    if cb.grid_mode == "ends":
        # end-only mode keeps no block-sized temporary beside the block (the full mode two): twice the block in less
        # memory, more rows per matrix product (nearer the floor), in about equal blocks for the threads
        per = balanced_block(2 * per, m, cb.n_jobs)
    # each block's log densities are evaluated by the thread that ranks it (lazily: memory stays a few blocks)
    blocks = (
        (sl, functools.partial(log_density, sl, g[sl])) for sl in (slice(s, min(s + per, m)) for s in range(0, m, per))
    )
    return cb._predict_blocks(blocks, g, groups=groups, log_density=log_density, test_weights=test_weights)


def _predict_widening(
    cb: ConformalBayes,
    log_density: Any,
    g: np.ndarray,
    groups: Any,
    n_draws: int,
    *,
    widen: bool,
    test_weights: tuple[np.ndarray, Any] | None = None,
) -> tuple[xr.Dataset, np.ndarray]:
    """Predict; while a default grid is too narrow for a point's set (the set reaches its edge), widen it.

    Warnings of a pass that is done again are dropped: only the final pass's diagnostics reach the user.
    Returns the prediction and which test points' grids were widened.
    """
    widened = np.zeros(g.shape[0], bool)
    for _ in range(_grid.GRID_EXTEND_ROUNDS if widen else 0):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pred = _predict(cb, log_density, g, groups, n_draws, test_weights)
        edge = _grid.reaches_edge(pred)
        if not edge.any():
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return pred, widened
        g, widened = _grid.widen_where(g, edge), widened | edge
    return _predict(cb, log_density, g, groups, n_draws, test_weights), widened


def _rows(new: Any, rows: slice) -> Any:
    """The test points ``rows`` of the new inputs (a dict of arrays, or a bambi DataFrame)."""
    if isinstance(new, dict):
        return {k: v[rows] for k, v in new.items()}
    return new.iloc[rows].reset_index(drop=True)


#: Per model (weakly keyed: dropped with the model), the doors' shared state by (variable, mode,
#: the model's variables): its transform-free clone and compiled functions, so that a second call
#: on the same model neither clones nor compiles again.
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Shared:
    """A model's transform-free clone, its observed variable, the compiled functions and their lock."""

    def __init__(self, model: Any, var_name: Any) -> None:
        from pymc.model.transform.conditioning import remove_value_transforms

        self.clone = remove_value_transforms(model)
        observed = {rv.name: rv for rv in self.clone.observed_RVs}
        if var_name is None and len(observed) != 1:
            raise ValueError(f"var_name: the model has observed variables {sorted(observed)}; name one.")
        name = var_name if var_name is not None else next(iter(observed))
        if name not in observed:
            raise ValueError(
                f"var_name={name!r} is not an observed variable of the model; pass one of {sorted(observed)}."
            )
        self.rv = observed[name]
        self.fns: dict = {}  # kind -> (compiled function, free variables' names, batched flags)
        # the clone's containers are set per evaluation: one evaluation at a time (blocks run in threads)
        self.lock = threading.RLock()

    @classmethod
    def of(cls, model: Any, var_name: Any, mode: Any) -> _Shared:
        mode_key = mode if isinstance(mode, str) or mode is None else id(mode)
        key = (var_name, mode_key, tuple((k, id(v)) for k, v in model.named_vars.items()))
        try:
            per_model = _SHARED.setdefault(model, {})
        except TypeError:  # not weakly referenceable: no reuse
            return cls(model, var_name)
        shared = per_model.get(key)
        if shared is None:
            shared = per_model[key] = cls(model, var_name)
        return shared


class _Door:
    """One model's transform-free clone, its observed variable and compiled log densities."""

    def __init__(self, model: Any, idata: Any, var_name: Any, compile_mode: Any) -> None:
        self.mode = get_compile_mode() if compile_mode is None else compile_mode
        self.logp_mode = _LOGP_MODE if compile_mode is None else compile_mode
        self.shared = _Shared.of(model, var_name, self.mode)
        self.clone, self.rv = self.shared.clone, self.shared.rv
        self.values = self._posterior_values(idata)
        self.n_draws = next(iter(self.values.values())).shape[0]
        target = self.clone.rvs_to_values[self.rv]
        self.data_names = {v.name for v in self.clone.data_vars}
        self.target = target.name if target.name in self.data_names else None

    def _posterior_values(self, idata: Any) -> dict[str, np.ndarray]:
        post = idata["posterior"]
        out = {}
        for v in self.clone.value_vars:
            if v.name not in post.data_vars:
                raise ValueError(
                    f"idata's posterior lacks {v.name!r}, a free variable of the model: pass the tree that "
                    "pm.sample returned for this model."
                )
            out[v.name], _ = _inputs.sample_matrix(post[v.name], f"posterior {v.name!r}")
        return out

    def new_data(self, X_new: Any) -> dict[str, np.ndarray]:
        inputs = sorted(self.data_names - {self.target})
        if not isinstance(X_new, dict):
            if len(inputs) != 1:
                raise ValueError(
                    f"X_new: the model has input containers {inputs}; pass a dict {{name: new values}} for them."
                )
            X_new = {inputs[0]: X_new}
        unknown = sorted(set(X_new) - set(inputs))
        if unknown:
            raise ValueError(
                f"X_new names {unknown}, which are not pm.Data inputs of the model; use the names {inputs}."
            )
        new = {k: np.asarray(v) for k, v in X_new.items()}
        lengths = {k: v.shape[0] if v.ndim else 0 for k, v in new.items()}
        if len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ValueError(f"X_new: every container needs one row per test point; got lengths {lengths}.")
        for k, v in new.items():  # the width before any product inside the model's graph
            fitted = np.shape(self.clone[k].get_value())
            if v.shape[1:] != tuple(fitted[1:]):
                raise ValueError(
                    f"X_new[{k!r}] has rows of shape {v.shape[1:]} but the model's container {k!r} holds rows of "
                    f"shape {tuple(fitted[1:])}; pass the same columns as the training data, one row per test point."
                )
        return new

    @staticmethod
    def n_new(new: dict[str, np.ndarray]) -> int:
        return len(next(iter(new.values())))

    def choose(self, method: str) -> str:
        family = type(self.rv.owner.op).__name__
        if method == "closed-form" and family not in _CLOSED_FORM:
            raise ValueError(
                f"method='closed-form' covers Normal and Student-t likelihoods; {self.rv.name!r} is {family}. "
                "Use method='logp'."
            )
        if method == "logp" or (method == "auto" and family not in _CLOSED_FORM):
            if self.target is None:
                raise ValueError(
                    f"method='logp' needs the observed values of {self.rv.name!r} in a pm.Data container "
                    "(observed=pm.Data('y', y)) so that the grid can be scored in their place."
                )
            return "logp"
        return "closed-form"

    def _set(self, data: dict[str, np.ndarray]) -> None:
        import pymc as pm

        n = len(next(iter(data.values())))
        coords = {}
        for name in data:
            dims = self.clone.named_vars_to_dims.get(name)
            if dims:
                coords[dims[0]] = np.arange(n)
        pm.set_data(data, model=self.clone, coords=coords or None)

    def predictive_draws(self, new: Any, m: int, random_seed: Any) -> np.ndarray | None:
        """One posterior predictive draw per posterior draw at each test input, (draws, m).

        None when the likelihood is not univariate (one coordinate cannot be drawn alone).
        """
        op = self.rv.owner.op
        if getattr(op, "ndim_supp", None) != 0:
            return None
        data = dict(new)
        if self.target is not None:
            data[self.target] = np.zeros(m)
        with self.shared.lock:
            self._set(data)
            return self._draw(m, random_seed)

    def _draw(self, m: int, random_seed: Any) -> np.ndarray:
        import pytensor.tensor as pt
        from pytensor.tensor.type_other import NoneTypeT

        op = self.rv.owner.op
        rng, size, *params = self.rv.owner.inputs
        # the observed variable's fixed size would block batching over draws: give the parameters that
        # shape instead and draw without a size
        if isinstance(size.type, NoneTypeT):
            params = list(pt.broadcast_arrays(*params))
        else:
            params = [pt.broadcast_to(p, size) for p in params]
        fn = self._compile([op.make_node(rng, None, *params).outputs[1]], draws=True, random_seed=random_seed)
        out = np.empty((self.n_draws, m))
        for sl in self._draw_batches(8 * m * 4):
            out[sl] = np.asarray(fn(sl)[0], float).reshape(sl.stop - sl.start, m)
        return out

    def _compile(self, outs: Any, *, draws: bool = False, random_seed: Any = None, kind: Any = None) -> Any:
        """A function of a slice of draws; with ``kind``, compiled once per model and reused."""
        entry = None if kind is None else self.shared.fns.get(kind)
        if entry is None:
            graph = outs() if callable(outs) else outs
            entry = self._build(graph, draws, random_seed, self.mode)
            if kind is not None:
                self.shared.fns[kind] = entry
        fn, names, self.batched = entry
        return lambda sl: fn(*(self.values[k][sl] for k in names))

    def _logp_function(self) -> _LogpFunction:
        """The observed variable's elementwise logp, the data containers as inputs (compiled once per model)."""
        key = ("logp", self.logp_mode)
        entry = self.shared.fns.get(key)
        if entry is None:
            entry = self.shared.fns[key] = self._build_logp(self.clone.logp(vars=[self.rv], sum=False, jacobian=False))
        return entry

    def _build_logp(self, graph: Any) -> _LogpFunction:
        """The ``logp`` path's function: in Numba by default, in the door's mode where Numba fails to compile it.

        The model's ``pm.Data`` containers are replaced by inputs of the function (and a dimension whose
        length follows a container, by that input's length), so that calls need not set the shared
        containers: threads evaluate their blocks at once, each with its own copy of the function.
        """
        import pytensor.tensor as pt

        data = {d: pt.tensor(name=d.name, shape=(None,) * d.ndim, dtype=d.dtype) for d in self.clone.data_vars}
        lengths = {}
        for d, sym in data.items():
            dims = self.clone.named_vars_to_dims.get(d.name)
            length = self.clone.dim_lengths.get(dims[0]) if dims else None
            if length is not None and length not in data and hasattr(length, "get_value"):
                lengths[length] = pt.cast(sym.shape[0], length.dtype)
        replace = {**data, **lengths}
        if self.logp_mode != _LOGP_MODE:
            built = self._build(graph, False, None, self.logp_mode, replace)
        else:
            try:
                built = self._build(graph, False, None, _LOGP_MODE, replace)
            except Exception:  # noqa: BLE001 - an op Numba cannot lower: the default mode runs every PyTensor op
                built = self._build(graph, False, None, self.mode, replace)
        return _LogpFunction(built[0], built[1], [d.name for d in data])

    def _build(self, outs: Any, draws: bool, random_seed: Any, mode: Any, replace: Any = None) -> Any:
        import pytensor
        import pytensor.tensor as pt
        from pymc.pytensorf import compile as compile_with_rngs
        from pytensor.graph.replace import graph_replace, vectorize_graph

        batched = {
            v: pt.tensor(name=f"{v.name}_draws", shape=(None, *v.type.shape), dtype=v.dtype)
            for v in self.clone.value_vars
        }
        plain = self.clone.replace_rvs_by_values(outs)
        inputs = list(batched.values())
        if replace:  # the shared containers become inputs; a dimension's length, an expression of its container's
            plain = graph_replace(plain, replace=replace, strict=False)
            inputs += [v for v in replace.values() if v.owner is None]
        outs = vectorize_graph(plain, replace=batched)
        # an output that does not depend on the draws (a constant nu) keeps its shape: no draw axis
        flags = [o.type.ndim == p.type.ndim + 1 for o, p in zip(outs, plain, strict=True)]
        if not draws:
            fn = pytensor.function(inputs, outs, on_unused_input="ignore", mode=mode)
        else:  # PyMC's compile seeds the graph's random generators and updates them between calls
            fn = compile_with_rngs(inputs, outs, random_seed=random_seed, on_unused_input="ignore", mode=mode)
        return fn, [v.name for v in self.clone.value_vars], flags

    def _draw_batches(self, row_bytes: int) -> Iterator[slice]:
        per = max(1, _BLOCK_BYTES // max(row_bytes, 1))
        for start in range(0, self.n_draws, per):
            yield slice(start, min(start + per, self.n_draws))

    def closed_form_params(self, new: Any, m: int) -> tuple[str, list[np.ndarray]]:
        """The likelihood's family and parameters (draws, m) at the m test inputs, for all draws."""
        data = dict(new)
        if self.target is not None:
            data[self.target] = np.zeros(m)
        family = type(self.rv.owner.op).__name__
        params = [np.empty((self.n_draws, m)) for _ in _CLOSED_FORM[family]]
        with self.shared.lock:
            self._set(data)
            # compiled once per model: a second call, and a base evaluating many row sets, reuse it
            fn = self._compile(lambda: list(self.rv.owner.op.dist_params(self.rv.owner)), kind="closed")
            for sl in self._draw_batches(8 * m * 4):
                for k, p in enumerate(fn(sl)):
                    params[k][sl] = _per_draw(np.asarray(p, float), sl.stop - sl.start, m, self.batched[k])
        return family, params

    def logp_blocks(self, new: Any, g: Any, out: np.ndarray | None = None) -> Iterator[tuple[slice, np.ndarray]]:
        """The model's elementwise logp of the observed variable at (test input, grid value) rows.

        ``out`` (draws, m, G): written in place, each block a view of its slice (the door's reused
        per-thread buffer: no fresh pages per block); default a new array per block.
        """
        m, G = g.shape
        # the block bound caps a new array per block; into the caller's buffer the request is one block (the
        # draws' batches below bound the compiled function's own temporaries either way)
        per = m if out is not None else max(1, _BLOCK_BYTES // (8 * self.n_draws * G))
        whole = out
        logp = self._logp_function()  # compiled once per model: refinement, a second call and a base reuse it
        for start in range(0, m, per):
            sl = slice(start, min(start + per, m))
            b = sl.stop - sl.start
            data = {k: np.repeat(v[sl], G, axis=0) for k, v in new.items()}  # row j * G + g
            data[str(self.target)] = g[sl].reshape(-1)
            out = np.empty((self.n_draws, b, G)) if whole is None else whole[:, sl]
            # containers not given keep their values (as pm.set_data of the others would leave them)
            args = [
                np.asarray(data[k]).astype(self.clone[k].dtype, copy=False) if k in data else self.clone[k].get_value()
                for k in logp.data_names
            ]  # in the container's dtype, as pm.set_data casts (an int64 index to PyMC's int32, say)
            with logp.copy() as fn:  # this thread's copy: no shared container is set, no lock held
                for ds in self._draw_batches(8 * b * G * 3):
                    values = [self.values[k][ds] for k in logp.names]
                    out[ds] = np.asarray(fn(*values, *args)[0]).reshape(ds.stop - ds.start, b, G)
            yield sl, out


class _LogpFunction:
    """A compiled logp of (posterior values, data inputs), lent to threads one copy each.

    A PyTensor function holds its inputs' and outputs' storage, so one object cannot serve two threads
    at once; its copies share the compiled code (a copy takes milliseconds, measured) and are kept for
    the next call.
    """

    def __init__(self, fn: Any, names: list[str], data_names: list[str]) -> None:
        self.fn, self.names, self.data_names = fn, names, data_names
        self._free: list = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def copy(self) -> Iterator[Any]:
        with self._lock:
            fn = self._free.pop() if self._free else self.fn.copy()
        try:
            yield fn
        finally:
            with self._lock:
                self._free.append(fn)


def _per_draw(p: np.ndarray, n_draws: int, m: int, batched: bool) -> np.ndarray:
    """A likelihood parameter as (draws, m): batched over draws, or constant (no draw axis)."""
    if batched:
        return np.broadcast_to(p.reshape(n_draws, -1), (n_draws, m))
    return np.broadcast_to(p.reshape(-1), (n_draws, m))


def _closed_form_logpdf(family: str, params: Any, y: Any) -> np.ndarray:
    """Normal or Student-t log density, broadcast over (draws, test points, grid)."""
    if family == "NormalRV":
        mu, sigma = params
        z = (y - mu) / sigma
        return -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    nu, mu, sigma = params
    z = (y - mu) / sigma
    return (
        special.gammaln((nu + 1) / 2)
        - special.gammaln(nu / 2)
        - 0.5 * np.log(nu * np.pi)
        - np.log(sigma)
        - (nu + 1) / 2 * np.log1p(z * z / nu)
    )


def _normal_logpdf(
    mu: np.ndarray, sigma: np.ndarray, y: np.ndarray, out: np.ndarray | None = None, log_sigma: Any = None
) -> np.ndarray:
    r"""(S, b, K) Normal log densities :math:`-\tfrac12 z^2 - \log\sigma - \tfrac12\log 2\pi`, one pass.

    ``mu``, ``sigma`` (S, b) per draw and test point (any strides: read in place), ``y`` (b, K)
    candidates; ``out`` (S, b, K), C-ordered, is written (default: a new array); ``log_sigma``:
    ``np.log(sigma)`` when the caller has it. The same operations in the same order as
    :func:`_closed_form_logpdf` (``log sigma`` by NumPy, whose ``log`` of a value does not depend on the
    array around it: compared on sliced rows in ``tests/calibrators/conformal/test_bayes_refine.py``), so
    the result is its result bit for bit, without its four temporaries of the block's size.
    """
    out = np.empty((*np.shape(mu), y.shape[1])) if out is None else out
    log_sigma = np.log(sigma) if log_sigma is None else log_sigma
    _kernels().normal(mu, sigma, log_sigma, np.ascontiguousarray(y, float), 0.5 * np.log(2 * np.pi), out)
    return out


def _student_t_terms(nu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The Student-t log density's terms free of the candidate, per (draw, test point).

    :math:`\log\Gamma(\tfrac{\nu+1}2) - \log\Gamma(\tfrac\nu2) - \tfrac12\log(\nu\pi) - \log\sigma`,
    summed left to right as :func:`_closed_form_logpdf` sums them, and :math:`(\nu+1)/2`.
    """
    const = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * np.pi) - np.log(sigma)
    return const, (nu + 1) / 2


def _student_t_logpdf(
    nu: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    y: np.ndarray,
    out: np.ndarray | None = None,
    terms: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    r"""(S, b, K) Student-t log densities without a temporary, :func:`_closed_form_logpdf`'s result bit for bit.

    .. math::

        \log\Gamma\big(\tfrac{\nu+1}2\big) - \log\Gamma\big(\tfrac\nu2\big) - \tfrac12\log(\nu\pi)
        - \log\sigma - \tfrac{\nu+1}2 \log\big(1 + z^2/\nu\big),\qquad z = (y - \mu)/\sigma.

    The terms that do not depend on the candidate come from :func:`_student_t_terms` (``terms``, when
    the caller has them). Per candidate, three passes over ``out``: a compiled one writes
    :math:`z^2/\nu`, NumPy's ``log1p`` runs in place (Numba's ``log1p``, the C library's, differs from
    NumPy's in the last bit on a few per cent of values: measured), a compiled one finishes the
    subtraction.
    """
    out = np.empty((*np.shape(mu), y.shape[1])) if out is None else out
    nu, sigma = (np.broadcast_to(p, np.shape(mu)) for p in (nu, sigma))
    const, half_nu1 = _student_t_terms(nu, sigma) if terms is None else terms
    k = _kernels()
    k.student_t_arg(nu, mu, sigma, np.ascontiguousarray(y, float), out)
    np.log1p(out, out=out)
    k.student_t_finish(const, half_nu1, out)
    return out


class _ClosedForm:
    """A Normal or Student-t likelihood's log density at any (test points, candidates), from its parameters
    (S, m); the terms free of the candidate are computed once for every test point (one ``log`` per draw and
    point, not one per block and refinement step)."""

    def __init__(self, family: str, params: list[np.ndarray]) -> None:
        self.family, self.params = family, params
        if family == "NormalRV":
            self.terms: tuple[np.ndarray, ...] = (np.log(params[1]),)
        else:
            self.terms = _student_t_terms(params[0], params[2])

    def __call__(self, rows: slice, y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """:func:`_closed_form_logpdf` at test points ``rows`` and candidates ``y`` (b, K), into ``out``."""
        p = [v[:, rows] for v in self.params]
        if self.family == "NormalRV":
            return _normal_logpdf(p[0], p[1], y, out, self.terms[0][:, rows])
        const, half = self.terms
        return _student_t_logpdf(p[0], p[1], p[2], y, out, (const[:, rows], half[:, rows]))


class _ThreadBuffers(threading.local):
    """One float64 buffer per thread, grown when a block is larger, handed out as C-ordered views."""

    def get(self, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        buf = getattr(self, "buf", None)
        if buf is None or buf.size < size:
            self.buf = buf = np.empty(size)
        return buf[:size].reshape(shape)


@functools.cache
def _kernels() -> Any:
    """The closed-form log densities' compiled loops (Numba, cached on disk, release the GIL)."""
    import numba

    @numba.njit(nogil=True, cache=True)
    def normal(
        mu: Any, sigma: Any, log_sigma: Any, y: Any, half_log_2pi: Any, out: Any
    ) -> None:  # pragma: no cover - compiled
        S, b = mu.shape
        K = y.shape[1]
        for s in range(S):
            for j in range(b):
                m, sd, ls = mu[s, j], sigma[s, j], log_sigma[s, j]
                for k in range(K):
                    z = (y[j, k] - m) / sd
                    out[s, j, k] = -0.5 * z * z - ls - half_log_2pi

    @numba.njit(nogil=True, cache=True)
    def student_t_arg(nu: Any, mu: Any, sigma: Any, y: Any, out: Any) -> None:  # pragma: no cover - compiled
        S, b = mu.shape
        K = y.shape[1]
        for s in range(S):
            for j in range(b):
                n, m, sd = nu[s, j], mu[s, j], sigma[s, j]
                for k in range(K):
                    z = (y[j, k] - m) / sd
                    out[s, j, k] = z * z / n

    @numba.njit(nogil=True, cache=True)
    def student_t_finish(const: Any, half_nu1: Any, out: Any) -> None:  # pragma: no cover - compiled
        S, b, K = out.shape
        for s in range(S):
            for j in range(b):
                c, h = const[s, j], half_nu1[s, j]
                for k in range(K):
                    out[s, j, k] = c - h * out[s, j, k]

    return SimpleNamespace(normal=normal, student_t_arg=student_t_arg, student_t_finish=student_t_finish)
