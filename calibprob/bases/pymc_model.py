r"""Your own PyMC or bambi model as a comparison base: ``kind = "pymc-model"`` and ``kind = "bambi"``.

Both bases see the data **as you have them**: a :class:`pandas.DataFrame` of the data set's columns
(text columns and the group column included, raw values: not one-hot encoded, not standardised),
one row per observation, indexed by the observation's id in the data set, and the raw target
``y``. Their predictions are on the scale of that target.

``kind = "pymc-model"``
    ``entry = "package.module:factory"`` (imported when the spec is loaded, as ``kind = "python"``:
    a spec naming an ``entry`` is as trusted as the code it names), or from Python
    ``compare.run(spec, bases={"mine": {"kind": "pymc-model", "factory": factory}})``. The factory is

    .. code-block:: python

        def factory(data: pandas.DataFrame, y: numpy.ndarray) -> pymc.Model | tuple[pymc.Model, Callable]

    It builds (does not sample) a model whose inputs are ``pm.Data`` containers holding one row per
    observation, and returns it, or ``(model, inputs)`` where ``inputs(rows: DataFrame) -> {container
    name: values}`` gives the containers' values for new rows (needed when a column is encoded, e.g.
    a text county turned into an index by the *training* levels; without it, each container takes
    the column of the same name). ``var_name`` names the observed variable when there are several.
    The base samples the model with ``calibprob.bases._pymc_sampling.sample_posterior``
    (``draws``, ``tune``, ``chains``, ``target_accept``; the seed is the task's) and evaluates it at
    new rows through the PyMC door of conformal Bayes
    (``calibprob.calibrators.conformal.bayes.from_pymc._Door``: the containers are set, the
    likelihood's parameters computed per draw from one vectorised PyTensor function).

``kind = "bambi"``
    ``formula = "y ~ x + (1|county)"`` and optionally ``family`` (default ``"gaussian"``): a
    ``bambi.Model(formula, data, family=family)`` built on the training part's DataFrame with the
    target added under the formula's response name, fitted by ``model.fit`` with the same sampler
    settings, and evaluated at new rows through bambi's own ``predict`` (the bambi door of conformal
    Bayes); a group level absent from training gets bambi's ``sample_new_groups`` draws (each
    posterior draw takes a randomly chosen existing group's effect: the variation across groups).

What the calibrators need, both bases have (as :class:`~calibprob.bases.pymc_linear.PyMCLinearRegression`):
``predict(X, levels)`` (the posterior predictive's draws by :func:`calibprob.from_draws`),
``sample_predictive(X)`` (draws, ``(S, m)``), ``log_density(X, values) -> (S, m, G)`` (conformal
Bayes, Fong & Holmes 2021), ``loo_tree(random_state=)`` (PSIS-LOO calibration, :func:`calibprob.from_loo`,
and LOO jackknife+) and ``diagnostics_`` (r-hat, bulk ESS, divergences).

For Normal and Student-t likelihoods the log density is closed form and the predictive draws are
:math:`\mu_s + \sigma_s\varepsilon` with :math:`\varepsilon` drawn in NumPy from the given seed (the
same draws for the same seed, whatever was asked before); any other likelihood goes through PyMC's
``logp`` (the observed values must then be a ``pm.Data`` container) and its own random draws.

References
----------
Fong, E. and Holmes, C. (2021). Conformal Bayesian computation. NeurIPS 34.
Capretto, T. et al. (2022). Bambi: a simple interface for fitting Bayesian linear models in Python.
*Journal of Statistical Software* 103(15).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any, Self, cast

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob._core.estimator import ConvergenceWarning
from calibprob._core.options import SpecError, _short
from calibprob.bases._pymc_sampling import convergence_problems, convergence_summary, sample_posterior
from calibprob.bases.user import check_factory, factory_from_table
from calibprob.calibrators.conformal.bayes import _bambi as _bayes_bambi
from calibprob.calibrators.conformal.bayes.from_pymc import _CLOSED_FORM, _closed_form_logpdf, _Door
from calibprob.predictive import from_draws

__all__ = ["PyMCModelBase", "BambiBase", "build_pymc_model_base", "build_bambi_base", "check_pymc_model_table"]

#: Sampler settings of both kinds when the spec does not give them: small, as a first look (raise them).
SAMPLER_DEFAULTS = {"draws": 500, "tune": 500, "chains": 2, "target_accept": 0.9}


def check_pymc_model_table(options: dict, where: str) -> Callable[..., Any]:
    """A ``kind = "pymc-model"`` table: ``entry`` (importable) or, from Python, ``factory``; returns the factory."""
    code = [k for k in ("entry", "factory") if k in options]
    if len(code) != 1:
        raise SpecError(
            f"{where} (kind 'pymc-model') needs exactly one of entry = 'package.module:factory' (from TOML) or a "
            f"factory given from Python (compare.run(spec, bases={{name: {{'kind': 'pymc-model', 'factory': f}}}})); "
            f"got {', '.join(code) or 'neither'}."
        )
    factory = factory_from_table(options, where, "a Python function")
    if not callable(factory):
        raise SpecError(
            f"{where}: the factory must be a function (data: DataFrame, y: ndarray) -> pymc.Model; "
            f"got {type(factory).__name__} {_short(factory)}."
        )
    return factory


def _sampler(options: dict) -> dict:
    return {k: options.get(k, v) for k, v in SAMPLER_DEFAULTS.items()}


def build_pymc_model_base(options: dict, *, seed: int | None = None) -> PyMCModelBase:
    """The registered builder of ``kind = "pymc-model"``: an unfitted :class:`PyMCModelBase` for the table."""
    factory = check_pymc_model_table(options, f"the pymc-model base {options.get('entry', '')}".rstrip())
    return PyMCModelBase(
        factory, var_name=options.get("var_name"), random_state=seed, name=options.get("entry"), **_sampler(options)
    )


def build_bambi_base(options: dict, *, seed: int | None = None) -> BambiBase:
    """The registered builder of ``kind = "bambi"``: an unfitted :class:`BambiBase` for the table."""
    if "formula" not in options:
        raise SpecError(
            "a base of kind 'bambi' needs formula = '<response> ~ <terms>', e.g. formula = 'y ~ x + (1|county)' "
            "(the response is the data set's target column)."
        )
    return BambiBase(
        options["formula"], family=options.get("family", "gaussian"), random_state=seed, **_sampler(options)
    )


def _check_frame(data: object, name: str) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise TypeError(
            f"{name} must be a pandas DataFrame of the data set's columns (one row per observation); got "
            f"{type(data).__name__}. In a spec these bases receive it from the runner."
        )
    if len(data) == 0:
        raise ValueError(f"{name} has no rows; pass at least one.")
    return data


def _check_values(values: ArrayLike, m: int) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = np.broadcast_to(v, (m, v.size))
    if v.ndim != 2 or v.shape[0] != m:
        raise ValueError(
            f"values must have shape (G,) or ({m}, G) (candidate targets, one row per row of X); got {np.shape(values)}."
        )
    return v


class _FrameBase:
    """What both bases share: a DataFrame in, posterior draws out, and the protocol of the PyMC bases."""

    #: The comparison runner gives these bases the raw DataFrame of each part (``calibprob.registry.FRAME_BASES``).
    takes_frame = True
    random_state: int | None
    n_draws_: int
    idata_: xr.DataTree
    X_train_: pd.DataFrame
    y_train_: np.ndarray

    # --- a subclass sets these in fit -------------------------------------------------------------------
    def _params(self, X: pd.DataFrame) -> tuple[str, list[np.ndarray]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _closed(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def _logp(self, X: pd.DataFrame, v: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _library_draws(self, X: pd.DataFrame, seed: int | None) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- the protocol ----------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "idata_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit(data, y) first.")

    def log_density(self, X: pd.DataFrame, values: ArrayLike) -> np.ndarray:
        r"""Per-draw log density :math:`\log p(v \mid \theta_s, x)` of candidates ``values`` at rows ``X``: ``(S, m, G)``."""
        self._check_fitted()
        X = _check_frame(X, "X")
        v = _check_values(values, len(X))
        if self._closed():
            family, params = self._cached_params(X)
            return _closed_form_logpdf(family, [p[:, :, None] for p in params], v[None, :, :])
        return self._logp(X, v)

    def _cached_params(self, X: pd.DataFrame) -> tuple[str, list[np.ndarray]]:
        """The likelihood's parameters per draw at the rows ``X``, ``(S, m)`` each, remembered by row content.

        Conformal Bayes refines each set's ends by asking again for a few rows it has seen: their
        parameters are a function of the row's values alone (a bambi new group's draws are seeded), so
        the last full evaluation answers without asking PyMC or bambi again.
        """
        keys = pd.util.hash_pandas_object(X, index=False).to_numpy()
        cache = getattr(self, "_param_cache", None)
        if cache is not None and all(k in cache[0] for k in keys):
            cols = [cache[0][k] for k in keys]
            return cache[1], [p[:, cols] for p in cache[2]]
        family, params = self._params(X)
        self._param_cache = ({k: j for j, k in enumerate(keys)}, family, params)
        return family, params

    def sample_predictive(self, X: pd.DataFrame, *, random_state: int | None = None) -> np.ndarray:
        """Posterior-predictive draws at the rows ``X``, ``(S, m)``, one per posterior draw."""
        self._check_fitted()
        X = _check_frame(X, "X")
        seed = self.random_state if random_state is None else random_state
        if not self._closed():
            return self._library_draws(X, seed)
        family, params = self._cached_params(X)
        rng = np.random.default_rng(seed)
        if family == "NormalRV":
            mu, sigma = params
            return mu + sigma * rng.standard_normal(mu.shape)
        nu, mu, sigma = params
        return mu + sigma * rng.standard_t(nu)

    def predict(self, X: pd.DataFrame, levels: ArrayLike | None = None) -> xr.Dataset:
        """The posterior predictive at the rows ``X`` as :func:`calibprob.from_draws` (family ``"quantile"``)."""
        return from_draws(self.sample_predictive(X), levels, method=type(self).__name__)

    def predict_mean_std(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the posterior-predictive draws."""
        draws = self.sample_predictive(X)
        return draws.mean(axis=0), draws.std(axis=0, ddof=1)

    def loo_tree(self, *, random_state: int | None = None) -> xr.DataTree:
        """The fit as a PyMC-shaped tree for PSIS-LOO calibration (as ``PyMCLinearRegression.loo_tree``).

        ``posterior``, ``log_likelihood`` (:meth:`log_density` at the training rows and targets),
        ``posterior_predictive`` (:meth:`sample_predictive` at the training rows) and ``observed_data``,
        each ``y(chain, draw, obs)``.
        """
        self._check_fitted()
        y = self.y_train_
        post = self.idata_["posterior"].to_dataset()
        shape = (post.sizes["chain"], post.sizes["draw"], y.size)
        dims = ("chain", "draw", "obs")
        ll = self.log_density(self.X_train_, y[:, None])[:, :, 0]
        pp = self.sample_predictive(self.X_train_, random_state=random_state)
        return xr.DataTree.from_dict(
            {
                "posterior": post,
                "log_likelihood": xr.Dataset({"y": (dims, ll.reshape(shape))}),
                "posterior_predictive": xr.Dataset({"y": (dims, pp.reshape(shape))}),
                "observed_data": xr.Dataset({"y": (("obs",), y)}),
            }
        )

    def _diagnose(self, idata: xr.DataTree) -> None:
        rhat, ess, div = convergence_summary(idata)
        self.diagnostics_ = xr.Dataset(
            {
                "rhat": ((), rhat, {"long_name": "max rank-normalised split r-hat over the parameters"}),
                "ess_bulk": ((), ess, {"long_name": "min bulk effective sample size over the parameters"}),
                "divergences": ((), div, {"long_name": "NUTS divergent transitions after tuning"}),
            }
        )
        problems = convergence_problems(div, rhat)
        if problems:
            warnings.warn(
                f"{type(self).__name__} NUTS did not converge cleanly: {'; '.join(problems)}. "
                "Raise tune/draws or target_accept in the base's table.",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _check_y(self, data: pd.DataFrame, y: ArrayLike) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if y.ndim != 1 or y.size != len(data):
            raise ValueError(f"y must hold one target per row of data ({len(data)}); got shape {y.shape}.")
        if not np.isfinite(y).all():
            raise ValueError("y must be finite; drop or impute the missing targets first.")
        return y

    def __getstate__(self) -> dict[str, Any]:
        # neither a PyMC model nor its compiled functions pickle: the model is built again from the
        # training rows (the factory or formula is deterministic) and the door on first use
        state = dict(self.__dict__)
        for key in ("_door", "model_", "inputs_", "_param_cache"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "idata_" in state:
            self._rebuild()

    def _rebuild(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class PyMCModelBase(_FrameBase):
    """Your PyMC model as a base: ``factory(data, y) -> pm.Model`` (see the module docstring).

    Parameters
    ----------
    factory : callable
        ``(data: DataFrame, y: ndarray) -> pm.Model`` or ``-> (pm.Model, inputs)``.
    var_name : str, optional
        The observed variable, when the model has several.
    draws, tune, chains : int, default 500, 500, 2
    target_accept : float, default 0.9
    random_state : int, optional
        Seed of the sampler and of the predictive draws.
    name : str, optional
        Used in messages (the spec's ``entry``).

    Examples
    --------
    >>> import numpy as np, pandas as pd, pymc as pm
    >>> from calibprob.bases.pymc_model import PyMCModelBase
    >>> def factory(data, y):
    ...     with pm.Model() as model:
    ...         x = pm.Data("x", data["x"].to_numpy())
    ...         b = pm.Normal("b", 0, 5); s = pm.HalfNormal("s", 2)
    ...         pm.Normal("y", b * x, s, observed=y, shape=x.shape[0])
    ...     return model
    >>> rng = np.random.default_rng(0); df = pd.DataFrame({"x": rng.normal(size=40)})
    >>> base = PyMCModelBase(factory, draws=100, tune=100, random_state=1).fit(df, 2 * df["x"])  # doctest: +SKIP
    >>> base.predict(df.iloc[:3]).sizes["obs"]  # doctest: +SKIP
    3
    """

    def __init__(
        self,
        factory: Callable[..., Any],
        *,
        var_name: str | None = None,
        draws: int = 500,
        tune: int = 500,
        chains: int = 2,
        target_accept: float = 0.9,
        random_state: int | None = None,
        name: str | None = None,
    ) -> None:
        check_factory(factory, "factory")
        self.factory = factory
        self.var_name = var_name
        self.draws, self.tune, self.chains, self.target_accept = draws, tune, chains, target_accept
        self.random_state = random_state
        self.name = name or getattr(factory, "__qualname__", "factory")

    def fit(self, data: pd.DataFrame, y: ArrayLike) -> Self:
        """Build the model with the factory on ``(data, y)`` and sample its posterior."""
        data = _check_frame(data, "data")
        y = self._check_y(data, y)
        model, self.inputs_ = self._build(data, y)
        self.model_ = model
        seed = None if self.random_state is None else int(self.random_state)
        self.idata_ = sample_posterior(
            inference="nuts",
            draws=int(self.draws),
            tune=int(self.tune),
            chains=int(self.chains),
            seed=seed,
            target_accept=float(self.target_accept),
            model=model,
        )
        self.X_train_, self.y_train_ = data, y
        door = self._get_door()
        door.new_data(self._inputs(data))  # the inputs' names and widths, checked now rather than at predict
        self._diagnose(self.idata_)
        return self

    def _build(self, data: pd.DataFrame, y: np.ndarray) -> tuple[Any, Callable[[pd.DataFrame], dict] | None]:
        import pymc as pm

        out = self.factory(data.copy(), y.copy())
        inputs = None
        if isinstance(out, tuple) and len(out) == 2 and callable(out[1]):
            out, inputs = out
        if not isinstance(out, pm.Model):
            raise TypeError(
                f"the factory {self.name!r} must return a pymc.Model (built in `with pm.Model() as model:`, not "
                f"sampled), or (model, inputs) with inputs(rows) -> {{container: values}}; got {type(out).__name__}."
            )
        observed = [rv.name for rv in out.observed_RVs]
        if not observed:
            raise ValueError(f"the model of factory {self.name!r} has no observed variable; pass observed=y.")
        data_names = {v.name for v in out.data_vars}
        targets = {out.rvs_to_values[rv].name for rv in out.observed_RVs}
        if not data_names - targets:
            raise ValueError(
                f"the model of factory {self.name!r} has no pm.Data input containers, so it cannot be evaluated "
                "at new rows; wrap each input, e.g. x = pm.Data('x', data['x'].to_numpy()), and give the observed "
                "variable shape=x.shape[0]."
            )
        return out, inputs

    def _rebuild(self) -> None:
        self.model_, self.inputs_ = self._build(self.X_train_, self.y_train_)

    def _get_door(self) -> _Door:
        door = getattr(self, "_door", None)
        if door is None:
            door = self._door = _Door(self.model_, self.idata_, self.var_name, None)
            self.n_draws_ = door.n_draws
        return door

    def _inputs(self, X: pd.DataFrame) -> dict:
        door = self._get_door()
        names = sorted(door.data_names - {door.target})
        if self.inputs_ is not None:
            got = self.inputs_(X.copy())
            if not isinstance(got, dict):
                raise TypeError(
                    f"the inputs function of factory {self.name!r} must return a dict {{container: values}}; "
                    f"got {type(got).__name__}."
                )
            missing = sorted(set(names) - set(got))
            if missing:
                raise ValueError(
                    f"the inputs function of factory {self.name!r} gave no values for the containers {missing}; "
                    f"return every input container ({names})."
                )
            return {k: np.asarray(v) for k, v in got.items()}
        missing = [k for k in names if k not in X.columns]
        if missing:
            raise ValueError(
                f"the model of factory {self.name!r} has input containers {missing} that are not columns of the "
                f"data ({list(X.columns)}); return (model, inputs) from the factory, with inputs(rows) -> "
                "{container: values} for new rows."
            )
        return {k: X[k].to_numpy() for k in names}

    def _closed(self) -> bool:
        return type(self._get_door().rv.owner.op).__name__ in _CLOSED_FORM

    def _params(self, X: pd.DataFrame) -> tuple[str, list[np.ndarray]]:
        door = self._get_door()
        return door.closed_form_params(door.new_data(self._inputs(X)), len(X))

    def _logp(self, X: pd.DataFrame, v: np.ndarray) -> np.ndarray:
        door = self._get_door()
        door.choose("logp")  # refuses, naming the fix, when the observed values are not a pm.Data container
        out = np.empty((door.n_draws, *v.shape))
        for sl, block in door.logp_blocks(door.new_data(self._inputs(X)), v):
            out[:, sl] = block
        return out

    def _library_draws(self, X: pd.DataFrame, seed: int | None) -> np.ndarray:
        door = self._get_door()
        draws = door.predictive_draws(door.new_data(self._inputs(X)), len(X), seed)
        if draws is None:
            raise ValueError(
                f"the observed variable {door.rv.name!r} of factory {self.name!r} is multivariate, but a base predicts "
                "one number per row: use a univariate likelihood (one target per row) in the factory's model."
            )
        return draws


class _NewGroupsBambiDoor(_bayes_bambi.BambiDoor):
    """The bambi door of conformal Bayes, with unseen group levels allowed (bambi's ``sample_new_groups``).

    A fixed seed picks the existing groups whose effects a new level borrows, so every call (test rows,
    refinement of a set's ends) sees the same draws for it.
    """

    def __init__(self, model: Any, idata: xr.DataTree, seed: int | None) -> None:
        super().__init__(model, idata)
        self.seed = 0 if seed is None else int(seed)

    def _predict(self, new: pd.DataFrame, kind: str, **kw: Any) -> xr.DataTree:
        with warnings.catch_warnings():  # sample_new_groups is deprecated (bambi will do it by default)
            warnings.simplefilter("ignore", FutureWarning)
            return self.model.predict(
                self.slim, kind=kind, data=new, inplace=False, sample_new_groups=True, random_seed=self.seed, **kw
            )

    def closed_form_params(self, new: pd.DataFrame, m: int) -> tuple[str, list[np.ndarray]]:
        family, names = _bayes_bambi._CLOSED_FORM[self.likelihood]
        post = self._predict(new, "response_params")["posterior"]
        return family, [np.ascontiguousarray(self._per_draw(cast(xr.DataArray, post[name]), m)) for name in names]


def _response(formula: str) -> str:
    """The response column of a formula (backticks removed); refused when it is a transformation."""
    if not isinstance(formula, str) or "~" not in formula:
        raise ValueError(f"formula must read '<response> ~ <terms>', e.g. 'y ~ x + (1|county)'; got {formula!r}.")
    lhs = formula.split("~", 1)[0].strip()
    name = lhs[1:-1] if len(lhs) > 1 and lhs[0] == lhs[-1] == "`" else lhs
    if not name or re.search(r"[()`]", name):
        raise ValueError(
            f"formula {formula!r}: the response {lhs!r} must be a plain column name (the data set's target, in "
            "backticks if it holds dots, e.g. `log.radon`); transform the target with the spec's target_transform."
        )
    return name


#: a name in a formula: backticked, or an identifier (dots allowed) not followed by "(" (a function) or "=" (a keyword)
_NAME = re.compile(r"`([^`]+)`|(?<![\w.])([A-Za-z_][\w.]*)(?!\s*[(=\w.])")


def _formula_names(formula: str) -> list[str]:
    """The column names a formula reads (functions, keywords and numbers left out), in order of appearance."""
    names = []
    for quoted, plain in _NAME.findall(formula):
        name = quoted or plain
        if name not in names and name not in ("True", "False", "None"):
            names.append(name)
    return names


class BambiBase(_FrameBase):
    """A bambi formula as a base (see the module docstring).

    Parameters
    ----------
    formula : str
        A bambi formula; its response is the data set's target (``"`log.radon` ~ basement + (1|county)"``).
    family : str, default "gaussian"
        A bambi family name.
    draws, tune, chains : int, default 500, 500, 2
    target_accept : float, default 0.9
    random_state : int, optional
    """

    def __init__(
        self,
        formula: str,
        *,
        family: str = "gaussian",
        draws: int = 500,
        tune: int = 500,
        chains: int = 2,
        target_accept: float = 0.9,
        random_state: int | None = None,
    ) -> None:
        self.formula = formula
        self.family = family
        self.draws, self.tune, self.chains, self.target_accept = draws, tune, chains, target_accept
        self.random_state = random_state

    def fit(self, data: pd.DataFrame, y: ArrayLike) -> Self:
        """Build ``bambi.Model(formula, data + response)`` on the training rows and fit it with ``model.fit``."""
        data = _check_frame(data, "data")
        y = self._check_y(data, y)
        model = self._model(data, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bambi's own convergence notes: read once, in diagnostics_
            self.idata_ = model.fit(
                draws=int(self.draws),
                tune=int(self.tune),
                chains=int(self.chains),
                cores=1,
                target_accept=float(self.target_accept),
                random_seed=None if self.random_state is None else int(self.random_state),
                progressbar=False,
                quiet=True,  # passed on to pm.sample, as calibprob's own sampling call does
                compute_convergence_checks=False,
            )
        self.model_ = model
        self.X_train_, self.y_train_ = data, y
        self._get_door()
        self._diagnose(self.idata_)
        return self

    def _model(self, data: pd.DataFrame, y: np.ndarray) -> Any:
        """``bambi.Model(formula, data + response, family)``, unfitted."""
        response = _response(self.formula)
        frame = data.reset_index(drop=True).assign(**{response: y})
        missing = [v for v in _formula_names(self.formula) if v not in frame.columns]
        if missing:  # before importing bambi: the common mistake, said in the data's own words
            raise ValueError(
                f"formula {self.formula!r} names {missing[0]!r}, which is not a column of the data; its columns "
                f"are {list(data.columns)} and the response {response!r}. Name one of them (in backticks if it "
                "holds dots, e.g. `county.name`)."
            )
        import bambi as bmb

        try:
            return bmb.Model(self.formula, frame, family=self.family)
        except KeyError as err:
            raise ValueError(
                f"formula {self.formula!r} names {err.args[0]!r}, which is not a column of the data; its columns "
                f"are {list(data.columns)} and the response {response!r}. Name one of them."
            ) from None

    def _rebuild(self) -> None:
        self.model_ = self._model(self.X_train_, self.y_train_)
        self.model_.build()

    def _get_door(self) -> _NewGroupsBambiDoor:
        door = getattr(self, "_door", None)
        if door is None:
            door = self._door = _NewGroupsBambiDoor(self.model_, self.idata_, self.random_state)
            self.n_draws_ = door.n_draws
        return door

    def _rows(self, X: pd.DataFrame) -> pd.DataFrame:
        return self._get_door().new_data(X.reset_index(drop=True))

    def _closed(self) -> bool:
        return self._get_door().likelihood in _bayes_bambi._CLOSED_FORM

    def _params(self, X: pd.DataFrame) -> tuple[str, list[np.ndarray]]:
        return self._get_door().closed_form_params(self._rows(X), len(X))

    def _logp(self, X: pd.DataFrame, v: np.ndarray) -> np.ndarray:
        door = self._get_door()
        out = np.empty((door.n_draws, *v.shape))
        for sl, block in door.logp_blocks(self._rows(X), v):
            out[:, sl] = block
        return out

    def _library_draws(self, X: pd.DataFrame, seed: int | None) -> np.ndarray:
        door = self._get_door()
        tree = door._predict(self._rows(X), "response")
        values = np.asarray(tree["posterior_predictive"][door.response].values, float)
        return values.reshape(door.n_draws, len(X))
