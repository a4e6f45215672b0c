"""How the comparison runner runs the registered calibrator kinds and builds the bases.

Which kinds and bases exist, their classes, options, families and outputs are
registered in :mod:`calibprob.registry` (the one source). This module runs them:
:func:`run_kind` gives a kind's calibrator the one lifecycle of its family
(``calibprob._core.estimator``) — a distribution post-processor through
:func:`post_process` (``fit(pred_cal, y_cal)``, ``predict(pred)``), a model-aware
calibrator with ``estimator=`` the task's fitted base, ``fit(X_cal, y_cal)``,
``predict(X_test)`` — and a kind that needs more (the conformal interval methods:
the levels its number of scores resolves; the uncalibrated ``base``) registers one
of the adapters below. :func:`make_base` builds a base from its registered class.
The :class:`TaskContext` carries the split data and the base model fitted once per
task, shared by every method of that task. Classes are imported when first run, so a
spec that does not use them never pays for them.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from calibprob import registry
from calibprob._core.validation import check_choice
from calibprob.calibrators.conformal._intervals import interval_dataset, reachable_levels
from calibprob.calibrators.conformal.scores import get_score
from calibprob.calibrators.grouping.mondrian import Mondrian
from calibprob.compare.spec.model import MethodSpec
from calibprob.metrics import interval_levels
from calibprob.predictive import normal
from calibprob.predictive.loo import from_loo
from calibprob.registry._tables import MethodEntry
from calibprob.runs import faults
from calibprob.weights import GivenWeights, LikelihoodRatio

__all__ = [
    "TaskContext",
    "MethodKind",
    "METHOD_KINDS",
    "make_base",
    "base_predictive",
    "share_base_predictions",
    "shared_kriging_views",
    "calibration_prediction",
    "post_process",
    "run_kind",
    "run_base",
    "run_cross_conformal",
    "count_refits",
    "refits_its_base",
    "run_refits",
    "scalable_form",
    "run_gp_conformal",
    "run_loo_jackknife",
    "interval_levels_reachable",
    "run_cqr",
    "run_conditional_conformal",
]


@dataclass
class TaskContext:
    """Everything a calibrator needs inside one (data set, repetition) task.

    ``X_cal``/``y_cal`` are ``None`` when the spec's split has no calibration
    part (protocols that calibrate in-sample, e.g. Song et al. 2019).
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_cal: np.ndarray | None
    y_cal: np.ndarray | None
    X_test: np.ndarray
    base: object  # fitted base following the base-regressor protocol (None for the refits, which fit their own)
    base_spec: dict
    levels: np.ndarray | None
    seed: int
    confidence_levels: tuple = (0.5, 0.8, 0.9, 0.95, 0.99)
    #: Refits computed as separate tasks (:func:`run_refits`), for the one method of a method task.
    refits: list | BaseException | None = None
    #: Mondrian group labels per part (``{"train", "calibrate", "test"}``) from a spec's ``groups``.
    groups: dict | None = None
    #: The spec's ``max_method_minutes``: a method whose estimated n x n work is longer is refused.
    max_method_minutes: float = float("inf")
    #: :class:`calibprob.Mondrian`'s ``fallback`` for this method (a method's ``fallback`` key): None or "pooled".
    group_fallback: str | None = None
    #: The method asked for its per-group version (``groups = true``): grouped ranks for conformal Bayes.
    mondrian: bool = False
    #: The oracle likelihood ratio ``(calibration, test)`` of a data set declared with ``shift`` (else None).
    oracle_weights: tuple | None = None
    #: The weights ``(calibration, test)`` of a method's ``weights`` key (:func:`task_weights`), else None.
    weights: tuple | None = None
    #: The base's predictives computed once in the task's shared stage (:func:`share_base_predictions`):
    #: part name (``"train"``, ``"calibrate"``, ``"test"``) -> Dataset, ``"loo"`` -> (mean, std), and
    #: ``("kriging", gls)`` -> the GP's kriging view where several methods need it (:func:`shared_kriging_views`).
    shared: dict | None = None
    #: The test part's targets in time order, for online methods only (a ``[split] kind = "time"``; None otherwise):
    #: ``calibprob.compare.online.run_online`` reveals them one at a time, after each prediction.
    y_stream: np.ndarray | None = None
    #: A time split's order of the train rows followed by the burn-in rows in time (a ``shuffle = true`` split);
    #: None: already in time order. Read through :meth:`past`.
    past_order: np.ndarray | None = None
    #: A feedback twin's design (``calibprob.compare.feedback.feedback_arrays``): ``{"lam", "pool", "model",
    #: "test_row"}``; None for every other data set.
    feedback: dict | None = None

    def past(self) -> tuple[np.ndarray, np.ndarray] | None:
        """A time split's rows before the horizon (train and burn-in) in time order, ``(X, y)`` as the models see them.

        For online methods that refit on every earlier row; None without a time split. Built on demand
        (a spec without such a method allocates nothing more, so its results keep their bits).
        """
        if self.y_stream is None or self.X_cal is None or self.y_cal is None:
            return None
        X = np.concatenate([self.X_train, self.X_cal])
        y = np.concatenate([self.y_train, self.y_cal])
        if self.past_order is not None:
            X, y = X[self.past_order], y[self.past_order]
        return X, y

    def new_base(self) -> Any:
        """A fresh, unfitted copy of the base model (for methods that refit it)."""
        return make_base(self.base_spec, seed=self.seed)

    def predict_base(self, X: np.ndarray | pd.DataFrame) -> xr.Dataset:
        """The fitted base's predictive distribution at ``X`` (see :func:`base_predictive`).

        At one of the task's parts (the very array) it is the prediction of the shared stage
        (:func:`share_base_predictions`), copied so that no method can change another's input.
        """
        part = self._part_of(X)
        if part is not None and part in (self.shared or {}):
            return self.shared[part].copy(deep=True)  # type: ignore[index]  # checked on the line above
        return base_predictive(self.base, X, levels=self.levels)

    def base_loo(self) -> tuple[np.ndarray, np.ndarray]:
        """The fitted base's closed-form leave-one-out mean and sd (``base.loo()``), shared when computed once."""
        if self.shared is not None and "loo" in self.shared:
            mean, std = self.shared["loo"]
            return mean.copy(), std.copy()
        return self.base.loo()  # type: ignore[attr-defined]  # the callers check it has loo()

    def _part_of(self, X: object) -> str | None:
        # identity, not equality: an array of the task's split is that part (also after a pickle
        # round trip, which keeps the identities within one context)
        for name, part in (("test", self.X_test), ("calibrate", self.X_cal), ("train", self.X_train)):
            if X is part:
                return name
        return None

    @property
    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibration data, falling back to the training data when there is none."""
        if self.X_cal is None or self.y_cal is None:
            return self.X_train, self.y_train
        return self.X_cal, self.y_cal


def base_predictive(base: Any, X: np.ndarray | pd.DataFrame, *, levels: ArrayLike | None = None) -> xr.Dataset:
    """A fitted base model's predictive distribution at ``X``, as the contract's Dataset.

    A base's ``predict(X, levels=...)`` is used when it returns a Dataset (every
    calibprob base does; so can a user's own model, e.g. a PyMC model wrapped to
    return :func:`calibprob.from_draws` of its posterior predictive). A base that
    only follows the minimal Gaussian protocol ``predict_mean_std(X) -> (mu, sigma)``
    becomes :func:`calibprob.normal`.
    """

    predict = getattr(base, "predict", None)
    if predict is not None:
        out = predict(X, levels=levels) if levels is not None else predict(X)
        if isinstance(out, xr.Dataset):
            return out
    if hasattr(base, "predict_mean_std"):
        mu, sigma = base.predict_mean_std(X)
        return normal(mu, sigma, levels=levels)
    raise TypeError(
        f"the base model {type(base).__name__} must have predict(X) returning a predictive Dataset, "
        "or predict_mean_std(X) returning (mu, sigma)."
    )


@dataclass(frozen=True)
class MethodKind:
    """A calibrator kind as the runner calls it: ``func(ctx, **options)`` and its option names.

    A view of a :data:`calibprob.registry.METHODS` entry (kept for code written against
    the earlier table; the registry is the one source).
    """

    name: str
    func: Callable[..., xr.Dataset]
    options: frozenset
    doc: str = ""


class _MethodKinds(MutableMapping):
    """``kind -> MethodKind``, read from the registry; an item set here overrides it (tests patch it)."""

    def __init__(self) -> None:
        self._overrides: dict[str, MethodKind] = {}

    def __getitem__(self, kind: str) -> MethodKind:
        if kind in self._overrides:
            return self._overrides[kind]
        entry = registry.METHODS[kind]
        return MethodKind(kind, partial(run_kind, kind), frozenset(entry.options), entry.doc)

    def __setitem__(self, kind: str, value: MethodKind) -> None:
        self._overrides[kind] = value

    def __delitem__(self, kind: str) -> None:
        del self._overrides[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*registry.METHODS, *self._overrides]))

    def __len__(self) -> int:
        return len(set(registry.METHODS) | set(self._overrides))


#: Every calibrator kind a spec can name, as the runner calls it (read from :mod:`calibprob.registry`).
METHOD_KINDS: MutableMapping[str, MethodKind] = _MethodKinds()


def make_base(base_spec: dict, *, seed: int | None = None) -> Any:
    """Build an unfitted base model from a spec's base table (its registered kind and options).

    The kind's class is constructed with the table's options; the task's ``seed`` goes to
    the constructor argument the kind registers for it (``random_state``) unless given.
    """
    kind = registry.base_kind(base_spec["kind"])
    entry = registry.BASES.get(kind)
    if entry is None:
        raise ValueError(f"unknown base kind {kind!r}; registered: {', '.join(registry.BASES)}.")
    options = {k: v for k, v in base_spec.items() if k != "kind"}
    if entry.builder is not None:
        return registry.load_object(entry.builder)(options, seed=seed)
    if entry.seed is not None:
        options.setdefault(entry.seed, seed)
    return entry.load()(**options)


# ---------------------------------------------------------------------------
# The shared stage's base predictions (computed once per data set, repetition and base)
# ---------------------------------------------------------------------------


def _calibration_data_of(kind: str, options: dict) -> str | None:
    """The ``calibration_data`` a distribution post-processor of ``kind`` reads (None: not one)."""
    entry = registry.METHODS.get(kind)
    if entry is None or entry.family != "distribution" or entry.adapter is not None:
        return None
    return {**entry.defaults, **options}.get("calibration_data", "in-sample")


def shared_parts(ctx: TaskContext, methods: Sequence[MethodSpec]) -> list[str]:
    """The base predictives the task's ``methods`` read through :meth:`TaskContext.predict_base` / ``base_loo``.

    ``"test"`` and ``"calibrate"`` (with a calibration part) whenever a method runs; without
    one, ``"loo"`` when a post-processor calibrates on the closed-form LOO of a base that has
    it (``calibration_data`` ``"auto"`` or ``"loo"``) and ``"train"`` when one calibrates in sample.
    """
    if not methods:
        return []
    parts = ["test"] if ctx.X_cal is None else ["calibrate", "test"]
    if ctx.X_cal is not None:
        return parts
    # as calibration_prediction reads them: a PyMC base's "loo" is its PSIS-LOO (not shared)
    has_loo = callable(getattr(ctx.base, "loo", None))
    posterior_loo = callable(getattr(ctx.base, "loo_tree", None))
    for m in methods:
        data = _calibration_data_of(m.kind, m.options)
        if data is None or (data == "loo" and posterior_loo):
            continue
        wanted = "loo" if has_loo and data in ("auto", "loo") else "train"
        if not (wanted == "train" and data == "loo") and wanted not in parts:
            parts.append(wanted)
    return parts


def share_base_predictions(ctx: TaskContext, methods: Sequence[MethodSpec]) -> TaskContext:
    """``ctx`` with the base's predictives on the task's parts computed once (``ctx.shared``).

    Every method of the task then reads them (:meth:`TaskContext.predict_base`,
    :meth:`TaskContext.base_loo`) instead of asking the base again: with an exact GP on
    n training rows each prediction is O(n) per test row, the same for every method
    (issue 37). The same call with the same arrays gives the same bits, so the results are
    unchanged. A prediction that raises is left out: the methods that need it ask the
    base themselves and record its error as before.

    The GP's kriging view (:func:`shared_kriging_views`) is shared too where two or more of
    the task's computations coincide: J+GP, asymJ+GP and the full-conformal GP on the one
    GP, and a sparse GP's closed-form LOO, which is read off the same view.
    """
    shared: dict = {}
    arrays = {"train": ctx.X_train, "calibrate": ctx.X_cal, "test": ctx.X_test}
    parts = shared_parts(ctx, methods)
    shared.update(shared_kriging_views(ctx, methods, loo="loo" in parts))
    for part in parts:
        try:
            if part == "loo":
                shared[part] = _base_loo_of(ctx.base, shared)
            else:
                shared[part] = base_predictive(ctx.base, arrays[part], levels=ctx.levels)
        except Exception:  # the method that needs it raises it again, and records it
            continue
    return dataclasses.replace(ctx, shared=shared)


# ---------------------------------------------------------------------------
# The GP's kriging view, shared by the methods whose computations coincide (issue 37)
# ---------------------------------------------------------------------------


def _gp_conformal_model(ctx: TaskContext, entry: MethodEntry, options: dict) -> tuple[Any, np.ndarray]:
    """The kind's J+GP / asymJ+GP / full-conformal GP on the task's fitted GP (``prefit``, unfitted) and its levels."""
    kwargs = _constructor_kwargs(ctx, entry, options)
    levels, ok = interval_levels_reachable(ctx, len(ctx.y_train), _interval_sides(kwargs))
    return entry.load()(estimator=ctx.base, prefit=True, confidence_level=ok, **kwargs), levels


def _sparse_loo_key(base: Any) -> tuple[str, bool] | None:
    """The kriging view a sparse GP's ``loo()`` coincides with (``loo_from_system``), None for any other base."""
    if not callable(getattr(base, "loo_from_system", None)):
        return None
    return ("kriging", getattr(base, "mean", "zero") == "constant")


def shared_kriging_views(ctx: TaskContext, methods: Sequence[MethodSpec], *, loo: bool = False) -> dict:
    r"""The GP's kriging views that two or more computations of the task would make: ``key -> view``.

    A view (``calibprob.calibrators.conformal.gp``) is the part of J+GP, asymJ+GP and the
    full-conformal GP that depends on the fitted GP only: :math:`L^{-1}`, :math:`\operatorname{diag}Q^{-1}`,
    :math:`Q^{-1}y` of an exact GP (:math:`O(n^3)`), :math:`T = L_B^{-1}L_m^{-1}K_{mn}/\sigma` and the
    leave-one-out terms of a sparse GP (:math:`O(nm^2)`), keyed by whether the constant mean is
    re-estimated (``kriging_view_key``). Methods with the same key on the task's base compute the same
    view, bit for bit; so does a sparse GP's closed-form LOO (``loo``: the task shares it) when
    its mean handling is the view's. Computed here once when at least two of them need it; one
    alone computes it itself as before (so a task with one such method ships nothing more to
    its workers). A method refused for its n x n work (:func:`check_method_work`) does not count,
    and a view whose computation raises is left out (its methods raise it themselves).
    """
    wanted: dict[tuple, list] = {}
    for m in methods:
        entry = registry.METHODS.get(m.kind)
        if entry is None or entry.adapter not in _GP_CONFORMAL:
            continue
        options = {**entry.defaults, **m.options}
        try:
            check_method_work(ctx, m.kind, options)
            model, _ = _gp_conformal_model(ctx, entry, options)
            key = model.kriging_view_key()
        except Exception:  # refused or invalid: the method raises it itself, and records it
            continue
        wanted.setdefault(key, []).append(model)
    loo_key = _sparse_loo_key(ctx.base) if loo else None
    views: dict = {}
    for key, models in wanted.items():
        if len(models) + (key == loo_key) < 2:
            continue
        try:
            views[key] = models[0].kriging_view()
        except Exception:
            continue
    return views


def _base_loo_of(base: Any, shared: dict) -> tuple[np.ndarray, np.ndarray]:
    """The base's closed-form LOO: read off a shared kriging view where it coincides, else ``base.loo()``."""
    key = _sparse_loo_key(base)
    if key is not None and key in shared:
        return base.loo_from_system(shared[key].system)
    return base.loo()


def run_base(ctx: TaskContext, entry: MethodEntry | None = None) -> xr.Dataset:
    """The uncalibrated base model (B in Capone et al. 2023): its predictive distribution on the test part."""
    return ctx.predict_base(ctx.X_test)


# ---------------------------------------------------------------------------
# The two calibrator families, run the one way each (calibprob._core.estimator)
# ---------------------------------------------------------------------------


def calibration_prediction(ctx: TaskContext, calibration_data: str = "in-sample") -> tuple[xr.Dataset, np.ndarray]:
    """The base's predictive Dataset on the calibration data, and the targets.

    With a calibration split, its part as is. Without one (protocols that
    calibrate on the training part, e.g. Song et al. 2019), ``"in-sample"``
    uses the base's predictions at its own training points; ``"loo"`` its
    closed-form leave-one-out predictions (``ctx.base.loo()``, GP bases) — in-sample
    GP predictions are overfitted (residuals shrunk, σ too small relative to
    them); ``"auto"`` LOO when the base offers it, else in-sample.

    ``"loo"`` on a PyMC base (one with ``loo_tree()``, kind ``pymc-linear``) calibrates on
    :func:`calibprob.from_loo` of its posterior: every training point's PSIS-LOO predictive
    distribution, with the training targets — also when the spec has a calibration part,
    which it then leaves unused, so that "no holdout" and "holdout" compare on the same
    base and test part.
    """

    check_choice(calibration_data, "calibration_data", ("auto", "in-sample", "loo"))
    X_cal, y_cal = ctx.calibration
    in_sample = ctx.X_cal is None
    if calibration_data == "loo" and callable(getattr(ctx.base, "loo_tree", None)):
        return _posterior_loo(ctx), ctx.y_train
    has_loo = callable(getattr(ctx.base, "loo", None))
    if calibration_data == "loo" and not (in_sample and has_loo):
        raise ValueError(
            "calibration_data='loo' needs a base with a loo() method (e.g. kind 'gp') and a spec without a "
            "calibration split, or a PyMC base (kind 'pymc-linear'); use 'auto' or 'in-sample'."
        )
    if in_sample and has_loo and calibration_data in ("auto", "loo"):
        loo_mean, loo_std = ctx.base_loo()
        return normal(loo_mean, loo_std, levels=ctx.levels), y_cal
    return ctx.predict_base(X_cal), y_cal


def _posterior_loo(ctx: TaskContext) -> xr.Dataset:
    """:func:`calibprob.from_loo` of a PyMC base's fit (its predictive draws at the training points seeded by the task)."""

    with warnings.catch_warnings():
        # high Pareto k is a property of the model on these data; the runner records no warnings
        warnings.simplefilter("ignore")
        return from_loo(ctx.base.loo_tree(random_state=ctx.seed), levels=ctx.levels)  # type: ignore[attr-defined]


#: Attribute of a post-processor's prediction holding its exact intervals (a shift data set's protocol).
EXACT_INTERVALS = "exact_intervals"


def task_weights(ctx: TaskContext, kind: str) -> tuple[np.ndarray, np.ndarray]:
    r"""A method's ``weights``: the likelihood ratio at the calibration and test rows of the task.

    ``"oracle"``: the tilt of a data set declared with ``shift`` (1 on its unshifted twin);
    ``"logistic"``: :class:`~calibprob.weights.LikelihoodRatio` with unpenalised logistic regression,
    in-sample, unclipped (the airfoil script's ``glm``); ``"random-forest"``: 500 trees, out-of-bag
    probabilities clipped to [0.01, 0.99] (its ``randomForest``). The classifiers separate the
    whole training half (the fit part and the calibration part, as the script's ``glm`` and
    ``randomForest`` on its 752 training rows) from the test part; the weights are those of the
    calibration rows (out-of-bag for the forest) and of the test rows.
    """
    if ctx.X_cal is None:
        raise ValueError("weights need a calibration part: give the spec's split a 'calibrate' fraction.")
    if kind == "oracle":
        if ctx.oracle_weights is None:
            raise ValueError(
                "weights = 'oracle' needs the data set's tilt: declare shift = { tilt = { ... } } on the data set "
                "entry, or use weights = 'logistic'."
            )
        return ctx.oracle_weights
    # the protocol's reference side: the whole training half, fit part then calibration part (the
    # script's glm / randomForest on the 752 training rows); the calibration rows keep their weights
    reference = np.vstack([ctx.X_train, ctx.X_cal])
    if kind == "logistic":
        ratio = LikelihoodRatio(cv=None, clip=None).fit(reference, ctx.X_test)
    else:
        from sklearn.ensemble import RandomForestClassifier

        forest = RandomForestClassifier(n_estimators=500, random_state=ctx.seed, n_jobs=1)
        ratio = LikelihoodRatio(forest, cv="oob", random_state=ctx.seed).fit(reference, ctx.X_test)
    return ratio.calibration_weights_[len(ctx.X_train) :], ratio.test_weights_


def _weights_object(ctx: TaskContext) -> GivenWeights | None:
    """The task's method weights as one object (the protocol's ``on_small="ignore"``: infinite ends count)."""
    if ctx.weights is None:
        return None
    return GivenWeights(ctx.weights[0], test=ctx.weights[1], on_small="ignore")


def post_process(ctx: TaskContext, calibrator: Any, *, calibration_data: str = "in-sample") -> xr.Dataset:
    """Run a distribution post-processor: ``fit(pred_cal, y_cal)``, then ``predict(pred_test)``.

    With groups (a spec's ``groups = "<column>"``) the calibrator runs per group, as
    :class:`calibprob.Mondrian` of it (any post-processor, registered or not).
    """
    pred_cal, y_cal = calibration_prediction(ctx, calibration_data)
    weights = _weights_object(ctx)
    if weights is not None and calibration_data == "loo":
        raise ValueError("weights are for the calibration part's rows: use calibration_data = 'in-sample'.")
    fit_kw = {} if weights is None else {"weights": weights}
    groups = None
    if ctx.groups is not None:
        # the groups of the rows calibrated on: the training part for LOO calibration, as for no calibration part
        on_train = ctx.X_cal is None or calibration_data == "loo"
        groups = ctx.groups["train" if on_train else "calibrate"], ctx.groups["test"]
        fallback = None if weights is not None else ctx.group_fallback  # weights act within groups, no pooling
        mondrian = Mondrian(calibrator, fallback=fallback)
        calibrator = mondrian.fit(pred_cal, y_cal, groups=groups[0], **fit_kw)
    else:
        calibrator.fit(pred_cal, y_cal, **fit_kw)
    pred_test = ctx.predict_base(ctx.X_test)
    kwargs = {} if groups is None else {"groups": groups[1]}
    if ctx.levels is None:
        pred = calibrator.predict(pred_test, **kwargs)
    else:
        pred = calibrator.predict(pred_test, levels=ctx.levels, **kwargs)
    if ctx.oracle_weights is not None and hasattr(calibrator, "predict_interval"):
        # a data set declared with a shift (Tibshirani et al.'s protocol): the intervals scored are
        # the exact weighted thresholds (the test row's mass at +inf), not the smoothed quantile
        # function's ends, which sit below them; calibprob.compare.tasks scores these
        pred.attrs[EXACT_INTERVALS] = calibrator.predict_interval(
            pred_test, confidence_level=list(ctx.confidence_levels), **kwargs
        )
    return pred


def interval_levels_reachable(ctx: TaskContext, n: int, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """The spec's interval levels, and those that ``n`` conformal scores resolve (the others come back unbounded)."""

    levels = interval_levels(ctx.confidence_levels)
    ok = reachable_levels(levels, n, sides=sides)
    if not ok.any():
        raise ValueError(
            f"{n} points resolve none of the confidence levels {levels.tolist()}. Give more "
            "calibration data, or lower confidence levels (a level c needs about 1/(1-c) points)."
        )
    return levels, levels[ok]


# ---------------------------------------------------------------------------
# Running a registered kind: the family decides the lifecycle
# ---------------------------------------------------------------------------


def _need_calibration_split(ctx: TaskContext, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if ctx.X_cal is None:
        raise ValueError(
            f"kind {kind!r} needs a calibration part: give the spec's split a 'calibrate' fraction "
            "(e.g. split = {train = 0.6, calibrate = 0.2, test = 0.2})."
        )
    return ctx.X_cal, cast(np.ndarray, ctx.y_cal)  # set with X_cal


def _constructor_kwargs(ctx: TaskContext, entry: MethodEntry, options: dict) -> dict:
    """The class's keyword arguments: the kind's fixed ones, the spec's, and the task seed."""
    kwargs = {**entry.fixed, **entry.constructor_options(options)}
    if entry.seed is not None and kwargs.get(entry.seed) is None:
        kwargs[entry.seed] = ctx.seed  # seeded by the task: the same split gives the same result
    return kwargs


def run_kind(kind: str, ctx: TaskContext, **options: Any) -> xr.Dataset:
    """Run the registered calibrator ``kind`` with a spec's ``options`` on one task.

    Its adapter when it registers one; otherwise its family's one lifecycle
    (``calibprob._core.estimator``): a distribution post-processor through :func:`post_process`
    (``fit(pred_cal, y_cal)``, ``predict(pred_test)``), a model-aware calibrator with
    ``estimator=`` the task's fitted base, ``fit(X_cal, y_cal)``, ``predict(X_test)``.
    """
    entry = registry.METHODS[kind]
    options = {**entry.defaults, **options}
    if entry.needs_calibration_split and options.get("calibration_data") != "loo":
        _need_calibration_split(ctx, kind)
    if entry.adapter is not None:
        adapter = registry.load_object(entry.adapter) if isinstance(entry.adapter, str) else entry.adapter
        return adapter(ctx, entry, **options)
    kwargs = _constructor_kwargs(ctx, entry, options)
    if entry.family == "distribution":
        calibration_data = options.get("calibration_data", "in-sample")
        return post_process(ctx, entry.load()(**kwargs), calibration_data=calibration_data)
    model = entry.load()(estimator=ctx.base, **kwargs).fit(*ctx.calibration)
    if ctx.levels is None:
        return model.predict(ctx.X_test)
    return model.predict(ctx.X_test, levels=ctx.levels)


# ---------------------------------------------------------------------------
# Adapters: conformal intervals (Pion & Vazquez 2024 and the methods it builds on)
# ---------------------------------------------------------------------------


def _interval_sides(kwargs: dict) -> int:
    """1 for a symmetric score (one rank for both tails), 2 for a signed one (one rank per tail)."""

    score = kwargs.get("score")
    if score is None:
        return 1
    return 1 if get_score(score, beta=kwargs.get("beta", 1.0), eps=kwargs.get("eps", 0.0)).symmetric else 2


def _cross_conformal_model(ctx: TaskContext, entry: MethodEntry, options: dict) -> tuple[Any, np.ndarray]:
    """The kind's :class:`~calibprob.calibrators.conformal.CrossConformalRegressor` (unfitted) and the levels to predict."""
    kwargs = _constructor_kwargs(ctx, entry, options)
    if "folds" in options:
        kwargs["cv"] = int(options["folds"])
    levels, ok = interval_levels_reachable(ctx, len(ctx.y_train), _interval_sides(kwargs))
    return entry.load()(estimator=ctx.new_base(), confidence_level=ok, **kwargs), levels


def run_cross_conformal(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """Jackknife, jackknife+, CV+: refits of a fresh base on the training part, intervals at every level.

    Levels that the training size cannot resolve come back unbounded (the honest conformal answer).
    With ``ctx.refits`` (the results of :func:`run_refits` for every refit, computed as
    separate tasks) the model is assembled from them instead of refitting: the same numbers.
    """
    model, levels = _cross_conformal_model(ctx, entry, options)
    if ctx.refits is None:
        model.fit(ctx.X_train, ctx.y_train)
    elif isinstance(ctx.refits, BaseException):  # a refit task raised: the method fails as it would serially
        raise ctx.refits
    else:
        model.fit_from_refits(ctx.X_train, ctx.y_train, ctx.refits)
    return model.predict(ctx.X_test, confidence_level=levels)


#: Adapters whose model makes independent refits (:meth:`CrossConformalRegressor.fit_refit`).
_REFITTING = ("calibprob.compare.methods:run_cross_conformal", run_cross_conformal)


def refits_its_base(kind: str) -> bool:
    """Whether the calibrator ``kind`` refits a fresh base (jackknife, jackknife+, CV+): see :func:`count_refits`."""
    entry = registry.METHODS.get(kind)
    if entry is None:
        raise ValueError(
            f"unknown method kind {kind!r}; registered: {', '.join(registry.METHODS)}. "
            "Use one of these (calibprob.registry.METHODS) or register yours."
        )
    return entry.adapter in _REFITTING


def count_refits(ctx: TaskContext, kind: str, options: dict) -> int:
    """How many independent refits the calibrator ``kind`` makes on this task (0: none to split off).

    Jackknife (one per training point), jackknife+ and CV+ (one per fold) refit the base;
    the runner at method granularity runs them as separate tasks (:func:`run_refits`).
    A kind whose setup raises counts 0, so it runs whole and records its error as usual.
    """
    entry = registry.METHODS[kind]
    if not refits_its_base(kind):
        return 0
    try:
        model, _ = _cross_conformal_model(ctx, entry, {**entry.defaults, **options})
        if not isinstance(model.cv, str) and not isinstance(model.random_state, (int, np.integer)):
            return 0  # unseeded folds differ call to call: only one fit can use them
        return model.n_refits(len(ctx.y_train))
    except Exception:
        return 0


def check_method_work(ctx: TaskContext, kind: str, options: dict) -> None:
    """Refuse, before it starts, a method whose n x n work on an exact GP is too long or would not fit.

    The estimate of :func:`calibprob.runs.faults.method_work` (a method that refits the base counts its
    refits, :func:`count_refits`, on the rows of the other folds) is checked against the spec's
    ``max_method_minutes`` (:func:`~calibprob.runs.faults.check_method_time`) and the memory this
    process may still allocate (:func:`~calibprob.runs.faults.check_method_memory`).

    Raises
    ------
    TimeoutError, MemoryError
        Naming the estimate, its make-up, the budget and the fix.
    """
    n = len(ctx.y_train)
    refits = None
    if refits_its_base(kind) and ctx.base_spec.get("kind") in faults.EXACT_GP_BASES:
        count = count_refits(ctx, kind, options)
        folds = max(count - (options.get("method") == "base"), 2)
        refits = (count, n - -(-n // folds))  # each refit leaves one fold out
    faults.check_method_time(kind, options, ctx.base_spec, n, ctx.max_method_minutes, refits=refits)
    faults.check_method_memory(kind, options, ctx.base_spec.get("kind"), n, base_spec=ctx.base_spec, refits=refits)


# ---------------------------------------------------------------------------
# Methods switch to their scalable form instead of refusing at their defaults (issue 37)
# ---------------------------------------------------------------------------


def scalable_form(ctx: TaskContext, kind: str, options: dict, strict: bool = False) -> tuple[TaskContext, dict, str]:
    """The context and options method ``kind`` runs with: as given, or its scalable form where refused.

    A method whose n x n work on an exact GP :func:`check_method_work` refuses runs instead as

    * the sharp GP's ``full`` / ``cross-fitted`` variant: ``variant = "scaled"`` (Capone et al. 2023's
      one-scale-per-level line search on the base GP's own σ, no n x n work);
    * CV+, jackknife+, jackknife refitting an exact GP: refits of the sparse GP
      (:func:`calibprob.runs.faults.sparse_gp_table`: the shared options, 300 inducing points);

    and says so: the third item is the line the results store (``ran_as``), empty when nothing
    changed. ``strict = True`` (a method's ``strict = true``) keeps the refusal, as does a method with
    no scalable form, or whose scalable form is refused too.

    Raises
    ------
    TimeoutError, MemoryError
        :func:`check_method_work`'s refusal, where it stands.
    """
    try:
        check_method_work(ctx, kind, options)
        return ctx, options, ""
    except (TimeoutError, MemoryError) as err:
        if strict:
            raise
        refused = str(err).split("; refused")[0]
        if kind == "sharp-gp" and options.get("variant", "full") in ("full", "cross-fitted"):
            switched, note = (
                {**options, "variant": "scaled"},
                "variant 'scaled' (the base GP's own sigma, one scale per level)",
            )
        elif refits_its_base(kind) and ctx.base_spec.get("kind") in faults.EXACT_GP_BASES:
            table = faults.sparse_gp_table(ctx.base_spec)
            ctx = dataclasses.replace(ctx, base_spec=table)
            switched, note = options, f"refits of the sparse GP with {table['n_inducing']} inducing points"
        else:
            raise
    check_method_work(ctx, kind, switched)  # the scalable form answers to the same budget
    return ctx, switched, f"ran as {note}: its default was refused ({refused}); strict = true keeps the refusal"


def run_refits(ctx: TaskContext, kind: str, options: dict, ks: Iterable[int]) -> list | BaseException:
    """Refits ``ks`` of the calibrator ``kind`` (see :func:`count_refits`), or the exception one raised.

    The whole method's work is checked first (:func:`check_method_work`): a method refused for time or
    memory is refused by each of its refit tasks at once, not after them.
    """
    entry = registry.METHODS[kind]
    model, _ = _cross_conformal_model(ctx, entry, {**entry.defaults, **options})
    try:
        check_method_work(ctx, kind, options)
        return [model.fit_refit(ctx.X_train, ctx.y_train, int(k)) for k in ks]
    except Exception as err:  # raised again where the method is assembled, recorded like a serial failure
        return err


def run_loo_jackknife(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """LOO jackknife+: the task's fitted PyMC base (``prefit``), its PSIS-LOO weights, no refit."""

    kwargs = _constructor_kwargs(ctx, entry, options)
    levels, ok = interval_levels_reachable(ctx, len(ctx.y_train), 1)
    if isinstance(ctx.X_train, pd.DataFrame):  # a frame base: its tree and its draws, the same arithmetic
        model = entry.load()(confidence_level=ok, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit_tree(ctx.base.loo_tree(random_state=model.random_state), ctx.y_train, var_name="y")  # type: ignore[attr-defined]
        draws = ctx.base.sample_predictive(ctx.X_test, random_state=model.random_state)  # type: ignore[attr-defined]
        return model.predict_draws(draws, confidence_level=levels)
    model = entry.load()(estimator=ctx.base, prefit=True, confidence_level=ok, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # high Pareto k: see the method page; the runner records no warnings
        model.fit(ctx.X_train, ctx.y_train)
    return model.predict(ctx.X_test, confidence_level=levels)


def run_gp_conformal(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """J+GP, asymJ+GP, full-conformal GP: the task's fitted GP (``prefit``), its closed-form LOO.

    On the GP's kriging view of the shared stage when the task computed it once for several
    methods (:func:`shared_kriging_views`), else on its own: the same numbers.
    """
    model, levels = _gp_conformal_model(ctx, entry, options)
    view = (ctx.shared or {}).get(model.kriging_view_key())
    fitted = model.fit() if view is None else model.fit_with_view(view)
    return fitted.predict(ctx.X_test, confidence_level=levels)


#: The adapter of the kinds whose fit is the GP's kriging view (:func:`shared_kriging_views`).
_GP_CONFORMAL = ("calibprob.compare.methods:run_gp_conformal", run_gp_conformal)


def run_conformal_bayes(
    ctx: TaskContext, entry: MethodEntry, *, grid_size: int = 100, grid_margin: float = 2.0, **options: Any
) -> xr.Dataset:
    r"""Conformal Bayes (Fong & Holmes 2021) on the task's fitted PyMC base: no calibration split.

    The base's closed-form ``log_density`` gives the training log-likelihood (draws × n) and, on
    an equispaced grid of ``grid_size`` points over
    :math:`[\min y - m\,s_y,\ \max y + m\,s_y]` (:math:`m` = ``grid_margin``, :math:`s_y` the
    training targets' sd; the authors' grid is :math:`m = 2` on a unit-sd target), the test
    points' log densities, a block of test points at a time (memory draws × block × grid).
    """
    base: Any = ctx.base  # a posterior base (checked below); TaskContext types it as object
    if not callable(getattr(base, "log_density", None)):
        raise ValueError(
            f"kind 'conformal-bayes' needs a base with posterior draws and log_density(X, values) "
            f"(kind {', '.join(repr(k) for k in registry.POSTERIOR_BASES)}); got {type(base).__name__}."
        )
    kwargs = _constructor_kwargs(ctx, entry, options)
    # one thread per task: the runner parallelises over tasks (as with its one BLAS thread per process)
    kwargs.setdefault("n_jobs", 1)
    levels, _ = interval_levels_reachable(ctx, len(ctx.y_train), 1)  # too-small levels: CB returns infinite bounds
    y = np.asarray(ctx.y_train, dtype=float)
    ll = base.log_density(ctx.X_train, y[:, None])[:, :, 0]
    grid = np.linspace(y.min() - grid_margin * y.std(), y.max() + grid_margin * y.std(), int(grid_size))
    # groups = true: grouped ranks (Fong & Holmes 2021, partial exchangeability); a test group absent
    # from training ranks among all points with fallback = "pooled", else it is refused
    grouped = ctx.groups if ctx.mondrian else None
    if grouped is not None:
        kwargs.setdefault("fallback", "pooled" if ctx.group_fallback == "pooled" else None)
    train_groups = None if grouped is None else grouped["train"]
    model = entry.load()(confidence_level=levels, **kwargs).fit(ll, y=y, groups=train_groups)
    # a block of test points at a time: the log densities are draws x block x grid doubles
    step = max(1, 2_000_000 // (ll.shape[0] * len(grid)))
    parts = []
    for i in range(0, len(ctx.X_test), step):
        X_part = _take_rows(ctx.X_test, slice(i, i + step))
        # the ends are refined between grid points on the exact p-value: the base scores any candidates
        refine = partial(_log_density_rows, base, X_part)
        groups = {} if grouped is None else {"groups": grouped["test"][i : i + step]}
        parts.append(model.predict(base.log_density(X_part, grid), grid, log_density=refine, **groups))
    out = xr.concat(parts, dim="obs", data_vars="all", coords="different", compat="equals", join="outer")
    return out.assign_coords(obs=np.arange(out.sizes["obs"]))


def _log_density_rows(base: Any, X: np.ndarray | pd.DataFrame, rows: slice, values: np.ndarray) -> np.ndarray:
    """The base's log density of the test points ``X[rows]`` at per-point candidates ``values`` (b, K)."""
    return base.log_density(_take_rows(X, rows), values)


def _take_rows(X: np.ndarray | pd.DataFrame, rows: slice) -> np.ndarray | pd.DataFrame:
    """Rows of an array, or by position of a DataFrame (a frame base's parts are indexed by their obs ids)."""
    return X.iloc[rows] if isinstance(X, pd.DataFrame) else X[rows]


def run_cqr(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """CQR on the base's quantiles: intervals at every interval level the calibration part resolves.

    The base's predictive on the calibration and test parts is read at the quantile levels
    :math:`(1 \\mp c)/2` by the contract's interpolation where the base does not store them
    (``missing_levels="interpolate"``: the quantile-GBM base stores its own grid); levels the
    number of calibration points cannot resolve come back unbounded, as for the other
    conformal interval methods.
    """
    kwargs = _constructor_kwargs(ctx, entry, options)
    sides = 2 if kwargs.get("score") == "asymmetric" else 1
    X_cal, y_cal = _need_calibration_split(ctx, entry.kind)
    levels, ok = interval_levels_reachable(ctx, len(y_cal), sides)
    model = entry.load()(confidence_level=ok, missing_levels="interpolate", **kwargs)
    weights = _weights_object(ctx)
    model.fit(ctx.predict_base(X_cal), y_cal, **({} if weights is None else {"weights": weights}))
    return _on_levels(model.predict(ctx.predict_base(ctx.X_test)), levels, ok, len(y_cal))


def _on_levels(iv: xr.Dataset, levels: np.ndarray, ok: np.ndarray, n: int) -> xr.Dataset:
    """Intervals at the resolved levels ``ok`` put on the full grid ``levels``, the others unbounded."""
    m = iv.sizes["obs"]
    lower, upper = np.full((m, levels.size), -np.inf), np.full((m, levels.size), np.inf)
    keep = np.isin(np.round(levels, 12), np.round(ok, 12))
    lower[:, keep] = iv["lower"].transpose("obs", "confidence_level").values
    upper[:, keep] = iv["upper"].transpose("obs", "confidence_level").values
    out = interval_dataset(lower, upper, levels, False, method=iv.attrs["method"], attrs={"n_calibration": n})
    out.attrs["unbounded_levels"] = int((~keep).sum())
    return out


def run_conditional_conformal(ctx: TaskContext, entry: MethodEntry, **options: Any) -> xr.Dataset:
    """Conditional conformal on the base's predictive (intercept only: split conformal, until specs carry groups)."""
    kwargs = _constructor_kwargs(ctx, entry, options)
    X_cal, y_cal = _need_calibration_split(ctx, entry.kind)
    levels, ok = interval_levels_reachable(ctx, len(y_cal), 1)
    model = entry.load()(confidence_level=ok, **kwargs).fit(ctx.predict_base(X_cal), y_cal)
    return _on_levels(model.predict(ctx.predict_base(ctx.X_test)), levels, ok, len(y_cal))
