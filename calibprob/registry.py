"""The method registry: the one place that says which classes calibprob has and how they run.

Three tables, filled by the registration calls at the bottom of this module (and by
yours, for a calibrator or a base of your own):

* :data:`CLASSES` — every public estimator class by name: the module that exports it
  (``"module:Class"``, imported only when used, so nothing here imports PyMC), its role
  (``"calibrator"``, ``"base"`` or ``"helper"``), for a calibrator its *family*
  (``"distribution"``: a post-processor of the base's predictive distribution,
  ``fit(pred_cal, y_cal)``, ``predict(pred)``; ``"model-aware"``: ``estimator=``,
  ``fit(X, y)``, ``predict(X)``; see :mod:`calibprob._core.estimator`) and its *output*
  (``"distribution"``: a quantile function; ``"intervals"``: central intervals only),
  and the namespaces that export it (``calibprob``, ``calibprob.calibrators``,
  ``calibprob.calibrators.conformal``);
* :data:`METHODS` — every calibrator *kind* a comparison spec can name
  (``[methods.NAME] kind = ...``): its class, the options a spec may give with their
  declared types (:mod:`calibprob._core.options`), the constructor arguments the kind fixes,
  the base kinds it can serve (GP-only methods) and, only where the family's lifecycle
  is not enough, an *adapter* ``"module:function"`` that runs it;
* :data:`BASES` — every base kind (``[base]`` / ``[bases.NAME]``), the same way.

Readers: the spec validator (:mod:`calibprob.compare.spec`), the runner's dispatch
(:mod:`calibprob.compare.methods`: the family decides the lifecycle, the output decides
the scoring), the lazy-import tables of ``calibprob``, ``calibprob.calibrators`` and
``calibprob.calibrators.conformal``, the save/load table ``calibprob._core.persistence.REGISTRY`` (calibprob's own
classes only: a file never names code to import), the kinds table of ``docs/spec.md``
(:func:`render_kinds_table`) and ``tests/test_common.py``. A test checks every
entry's option names against its class's constructor signature.

Adding a calibrator is one module, one :func:`register_method` call, its docs page
and its tests. A distribution post-processor needs no runner code::

    from calibprob.registry import register_method
    from calibprob._core.options import Float

    register_method(
        "my-shift", "mypackage.shift:ShiftCalibrator",
        family="distribution", output="distribution",
        options={"scale": Float(0, None, lo_open=True)},
        doc="Shifts the base's quantiles by the median calibration residual.",
    )

A registration made in your own module reaches ``calibprob compare --workers N`` only
if the workers import that module too; a serial run (the default) sees it at once.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calibprob._core.options import AnyOf, Bool, Choice, Float, Int, ListOf, OptionType, Str, Theta

__all__ = [
    "ClassEntry",
    "MethodEntry",
    "BaseEntry",
    "CLASSES",
    "METHODS",
    "BASES",
    "FAMILIES",
    "OUTPUTS",
    "TASK_ARGUMENTS",
    "register_class",
    "register_method",
    "register_base",
    "base_kind",
    "RENAMED_BASE_KINDS",
    "exports",
    "load_object",
    "render_kinds_table",
    "render_bases_table",
    "render_doc",
    "update_doc",
]

#: The calibrator families: the two of :mod:`calibprob._core.estimator`, and ``posterior`` (fitted on a
#: posterior's pointwise log-likelihood, e.g. conformal Bayes: ``fit(log_likelihood)``).
FAMILIES = ("distribution", "model-aware", "posterior")
#: What a calibrator's ``predict`` returns: a quantile function or central intervals only.
OUTPUTS = ("distribution", "intervals")
ROLES = ("calibrator", "base", "helper")
#: Constructor arguments the runner fills from the task, never from the spec: the base model,
#: the interval levels an intervals-only method must resolve, and the quantile levels.
TASK_ARGUMENTS = ("estimator", "prefit", "confidence_level", "levels")


def load_object(target: str):
    """Import ``"package.module:name"`` and return the object (a class or a function)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"a registry target must read 'package.module:Name'; got {target!r}.")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class ClassEntry:
    """A public estimator class: where it lives, its role, family, output and exporting namespaces."""

    name: str
    module: str
    role: str
    family: str | None = None
    output: str | None = None
    exports: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.module}:{self.name}"

    def load(self) -> type:
        """The class itself (imports its module)."""
        return load_object(self.target)


@dataclass(frozen=True)
class MethodEntry:
    """A calibrator kind of the comparison spec.

    Attributes
    ----------
    kind : str
        The spec's ``kind = ...``.
    cls : str or None
        Name of its class in :data:`CLASSES` (``None`` for the uncalibrated ``base`` kind).
    family, output : str
        As the class's (see the module docstring).
    options : mapping of str to OptionType
        The options a spec may give and their declared types; each is a keyword of the
        class's constructor unless listed in ``runner_options``.
    doc : str
        One line for the kinds table.
    fixed : mapping
        Constructor arguments the kind fixes (e.g. ``method="plus"`` for jackknife+).
    seed : str or None
        Constructor argument seeded with the task's seed when the spec does not give it.
    serves : tuple of str or None
        Base kinds it can run on (``None``: any base).
    needs_calibration_split : bool
        Refused at run time on a split without a ``calibrate`` part.
    defaults : mapping
        Defaults of the runner options (e.g. ``calibration_data = "auto"`` for GP-Beta).
    runner_options : tuple of str
        Options that the runner or the adapter consumes (``calibration_data``), not the class.
    hidden : tuple of str
        Constructor arguments deliberately not offered to specs (e.g. ``chunk_size``).
    adapter : str, callable or None
        ``"module:function"`` (or the function) called as ``function(ctx, entry, **options)`` when the family's
        lifecycle does not suffice; ``None`` for most methods.
    """

    kind: str
    cls: str | None
    family: str
    output: str
    options: Mapping[str, OptionType] = field(default_factory=dict)
    doc: str = ""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    seed: str | None = None
    serves: tuple[str, ...] | None = None
    needs_calibration_split: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    runner_options: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    adapter: str | Callable | None = None

    def load(self) -> type:
        """The calibrator class (imports its module)."""
        if self.cls is None:
            raise TypeError(
                f"method kind {self.kind!r} has no class (it runs through its adapter): run it with calibprob.compare."
            )
        return CLASSES[self.cls].load()

    def constructor_options(self, options: Mapping) -> dict:
        """The keyword arguments of the class for a spec's ``options`` (runner options removed)."""
        return {k: v for k, v in options.items() if k not in self.runner_options}


@dataclass(frozen=True)
class BaseEntry:
    """A base-model kind of the comparison spec: its class, declared options and seed argument."""

    kind: str
    cls: str | None
    options: Mapping[str, OptionType] = field(default_factory=dict)
    doc: str = ""
    seed: str | None = None
    hidden: tuple[str, ...] = ()
    #: a factory ``"module:function"`` building the model from the table (kinds without a class)
    builder: str | None = None

    def load(self) -> type:
        if self.cls is None:
            raise TypeError(f"base kind {self.kind!r} has no class: build it with {self.builder}.")
        return CLASSES[self.cls].load()


CLASSES: dict[str, ClassEntry] = {}
METHODS: dict[str, MethodEntry] = {}
BASES: dict[str, BaseEntry] = {}

#: Base kinds renamed in 0.2.0 (old -> new). A spec naming the old kind still runs for one release, with a
#: FutureWarning naming the new one; the old name is removed in 0.3.0.
RENAMED_BASE_KINDS = {"pymc-glm": "pymc-linear"}  # keep-old-name


def base_kind(kind, where: str = "base.kind"):
    """The registered name of base kind ``kind``: a renamed kind gives its new name, with a FutureWarning.

    Anything else comes back unchanged (the caller checks it against :data:`BASES`).
    """
    new = RENAMED_BASE_KINDS.get(kind) if isinstance(kind, str) else None
    if new is None:
        return kind
    warnings.warn(
        f"{where}: kind {kind!r} was renamed {new!r} in calibprob 0.2.0 (module calibprob.bases.pymc_linear, class "
        f"PyMCLinearRegression); the old name is removed in 0.3.0. Write kind = {new!r}.",
        FutureWarning,
        stacklevel=3,
    )
    return new


def _check_choice(value, name: str, valid) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}; got {value!r}.")


def _split_target(target: str) -> tuple[str, str]:
    module, _, name = target.partition(":")
    if not module or not name or "." in name:
        raise ValueError(f"target must read 'package.module:ClassName'; got {target!r}.")
    return module, name


def register_class(
    target: str,
    *,
    role: str,
    family: str | None = None,
    output: str | None = None,
    exports: tuple[str, ...] = (),
) -> ClassEntry:
    """Register a public class (``"package.module:Class"``); returns its entry.

    Parameters
    ----------
    target : str
        The module that exports the class and its name; the module is not imported.
    role : {"calibrator", "base", "helper"}
    family : {"distribution", "model-aware", "posterior"}, optional
        Required for a calibrator.
    output : {"distribution", "intervals"}, optional
        Required for a calibrator.
    exports : tuple of str
        Namespaces that export the name lazily (``"calibprob"``, ``"calibprob.calibrators"``,
        ``"calibprob.calibrators.conformal"``).
    """
    module, name = _split_target(target)
    _check_choice(role, "role", ROLES)
    if role == "calibrator":
        _check_choice(family, "family", FAMILIES)
        _check_choice(output, "output", OUTPUTS)
    entry = ClassEntry(name, module, role, family, output, tuple(exports))
    CLASSES[name] = entry
    return entry


def register_method(
    kind: str,
    target: str | None,
    *,
    family: str,
    output: str,
    options: Mapping[str, OptionType] | None = None,
    doc: str = "",
    exports: tuple[str, ...] = (),
    **extra,
) -> MethodEntry:
    """Register a calibrator kind of the comparison spec (and its class, when new).

    Parameters
    ----------
    kind : str
        The name a spec gives as ``kind``.
    target : str or None
        ``"package.module:Class"``; ``None`` only with an ``adapter``.
    family : {"distribution", "model-aware"}
        Decides how the runner runs it: ``fit(pred_cal, y_cal)``/``predict(pred)`` on the
        task's base prediction, or ``estimator=`` the task's fitted base, ``fit(X_cal, y_cal)``,
        ``predict(X_test)``.
    output : {"distribution", "intervals"}
        Decides how it is scored: every metric, or coverage, width and IAE only.
    options : mapping of str to OptionType
        Spec options and their declared types (:mod:`calibprob._core.options`).
    doc : str
        One line for the generated kinds table.
    exports : tuple of str
        As in :func:`register_class`, when the class is registered by this call.
    **extra
        The other fields of :class:`MethodEntry` (``fixed``, ``seed``, ``serves``,
        ``needs_calibration_split``, ``defaults``, ``runner_options``, ``hidden``, ``adapter``).

    Returns
    -------
    MethodEntry

    Examples
    --------
    >>> from calibprob.registry import METHODS
    >>> METHODS["isotonic"].family, METHODS["isotonic"].output, sorted(METHODS["isotonic"].options)
    ('distribution', 'distribution', ['extrapolate'])
    >>> METHODS["jackknife-plus-gp"].output, METHODS["jackknife-plus-gp"].serves
    ('intervals', ('gp',))
    """
    _check_choice(family, "family", FAMILIES)
    _check_choice(output, "output", OUTPUTS)
    cls = None
    if target is not None:
        module, cls = _split_target(target)
        known = CLASSES.get(cls)
        if known is None or known.module != module:
            register_class(target, role="calibrator", family=family, output=output, exports=exports)
    elif extra.get("adapter") is None:
        raise ValueError(f"method kind {kind!r} needs a class target or an adapter.")
    entry = MethodEntry(kind, cls, family, output, dict(options or {}), doc, **extra)
    METHODS[kind] = entry
    return entry


def register_base(
    kind: str,
    target: str | None,
    *,
    options: Mapping[str, OptionType] | None = None,
    doc: str = "",
    exports: tuple[str, ...] = (),
    **extra,
) -> BaseEntry:
    """Register a base-model kind (``[base] kind = ...``) and, when new, its class; returns its entry.

    ``extra``: ``seed`` (the constructor argument given the task seed), ``hidden``, ``builder``.
    """
    cls = None
    if target is not None:
        module, cls = _split_target(target)
        known = CLASSES.get(cls)
        if known is None or known.module != module:
            register_class(target, role="base", exports=exports)
    elif extra.get("builder") is None:
        raise ValueError(f"base kind {kind!r} needs a class target or a builder.")
    entry = BaseEntry(kind, cls, dict(options or {}), doc, **extra)
    BASES[kind] = entry
    return entry


def exports(namespace: str) -> dict[str, str]:
    """``{name: module}`` of the classes that ``namespace`` exports lazily."""
    return {e.name: e.module for e in CLASSES.values() if namespace in e.exports}


def builtin_classes() -> dict[str, str]:
    """``{name: module}`` of calibprob's own classes (what :func:`calibprob.load` may construct)."""
    return {e.name: e.module for e in CLASSES.values() if e.module.split(".")[0] == "calibprob"}


def _options_cell(entry: MethodEntry) -> str:
    if not entry.options:
        return "—"
    cells = []
    for name, typ in entry.options.items():
        if isinstance(typ, Choice):
            cells.append(f"`{name}` ({', '.join(f'`{v}`' for v in typ.values)})")
        else:
            cells.append(f"`{name}`")
    return ", ".join(cells)


def render_kinds_table() -> str:
    """The Markdown table of every registered method kind (the one in ``docs/spec.md``).

    Columns: the kind (▪ marks intervals-only output), its family, what it does and the
    base kinds it needs, and its options (enum values in brackets).
    """
    rows = ["| kind | family | what | options |", "| --- | --- | --- | --- |"]
    for kind, e in METHODS.items():
        mark = " ▪" if e.output == "intervals" else ""
        what = e.doc.rstrip(".")
        if e.serves is not None:
            what += "; needs a " + " or ".join(f"`{b}`" for b in e.serves) + " base"
        if e.needs_calibration_split:
            what += "; needs a calibration part"
        family = (
            "—"
            if e.cls is None
            else {"distribution": "post-processor", "model-aware": "model-aware", "posterior": "posterior"}[e.family]
        )
        rows.append(f"| `{kind}`{mark} | {family} | {what} | {_options_cell(e)} |")
    return "\n".join(rows) + "\n"


def render_bases_table() -> str:
    """The Markdown table of every registered base kind (the one in ``docs/spec.md``)."""
    rows = ["| kind | class | what | options |", "| --- | --- | --- | --- |"]
    for kind, e in BASES.items():
        cls = "—" if e.cls is None else f"`{e.cls}`"
        opts = ", ".join(
            f"`{n}` ({', '.join(f'`{v}`' for v in t.values)})" if isinstance(t, Choice) else f"`{n}`"
            for n, t in e.options.items()
        )
        rows.append(f"| `{kind}` | {cls} | {e.doc} | {opts or '—'} |")
    return "\n".join(rows) + "\n"


#: The generated blocks of ``docs/spec.md``: (first line, last line, renderer).
DOC_BLOCKS = {
    "kinds": (
        "<!-- method kinds: generated by calibprob.registry.update_doc('docs/spec.md'); do not edit -->",
        "<!-- end of method kinds -->",
        render_kinds_table,
    ),
    "bases": (
        "<!-- base kinds: generated by calibprob.registry.update_doc('docs/spec.md'); do not edit -->",
        "<!-- end of base kinds -->",
        render_bases_table,
    ),
}


def update_doc(path) -> bool:
    """Rewrite the generated blocks of the page at ``path`` (e.g. ``docs/spec.md``); True if it changed."""
    from pathlib import Path

    page = Path(path)
    old = page.read_text(encoding="utf-8")
    new = render_doc(old)
    if new != old:
        page.write_text(new, encoding="utf-8")
    return new != old


def render_doc(text: str) -> str:
    """``text`` (a page such as ``docs/spec.md``) with every generated block rendered afresh."""
    for name, (begin, end, render) in DOC_BLOCKS.items():
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            raise ValueError(f"the page lacks the generated {name} block: add the lines {begin!r} and {end!r}.")
        text = text[: i + len(begin)] + "\n" + render() + text[j:]
    return text


# =====================================================================================
# The built-in classes, bases and method kinds
# =====================================================================================

_POS = Float(0, None, lo_open=True)
_NONNEG = Float(0, None)
_PROB = Float(0, 1, lo_open=True, hi_open=True)
_BOOL = Bool()
_SCORE = Choice(("absolute", "normalized", "signed", "signed-absolute"))
_CONFORMAL = {"beta": _POS, "eps": _NONNEG}
_TOP = ("calibprob",)

# --- helpers held by the estimators (saved and loaded with them) ---------------------
register_class(
    "calibprob.calibrators.conformal._common:CallableRegressor",
    role="helper",
    exports=("calibprob.calibrators.conformal",),
)
register_class("calibprob.datasets.splits:Standardizer", role="helper")
for _score in ("Score", "AbsoluteScore", "NormalizedScore", "SignedNormalizedScore", "SignedAbsoluteScore"):
    register_class(
        f"calibprob.calibrators.conformal.scores:{_score}", role="helper", exports=("calibprob.calibrators.conformal",)
    )
# the Mondrian wrapper: a helper (it needs a calibrator and groups, so it has no default-built
# contract run); every post-processor reaches it through its own groups= argument
register_class("calibprob.calibrators.conformal.mondrian:Mondrian", role="helper", exports=("calibprob",))
register_class("calibprob.calibrators.conformal.bins:Bins", role="helper")

# --- calibrators that no spec kind names ------------------------------------------------
register_class(
    "calibprob.calibrators.online:OnlineQuantileRecalibrator",
    role="calibrator",
    family="distribution",
    output="distribution",
    exports=_TOP,
)
register_class(
    "calibprob.calibrators.conformal.split:SplitConformalRegressor",
    role="calibrator",
    family="model-aware",
    output="distribution",
    exports=(*_TOP, "calibprob.calibrators.conformal"),
)

register_class(
    "calibprob.calibrators.conformal.bayes:ConformalBayes",
    role="calibrator",
    family="posterior",
    output="intervals",
    exports=(*_TOP, "calibprob.calibrators"),
)

# --- bases -----------------------------------------------------------------------------
_GP_OPTIONS = {
    "kernel": Choice(("se", "matern")),
    "p": Int(0, 10),
    "mean": Choice(("zero", "constant")),
    "noise": _BOOL,
    "nugget": Float(0, 1, lo_open=True, hi_open=True),
    "objective": Choice(("ml", "reml")),
    "theta": Theta(),
    "optimize": _BOOL,
    "n_restarts": Int(1, 1000),
    "optimizer": Choice(("lbfgs", "adam")),
    "adam_steps": Int(1, 1_000_000),
    "learning_rate": _POS,
    "compile_mode": Str(),
}
register_base(
    "gp",
    "calibprob.bases.gp:GaussianProcessRegressor",
    options=_GP_OPTIONS
    | {
        # exact GP at scale (issue 21): hyperparameters on a seeded subset of rows, refined on all
        "n_hyper_subset": AnyOf((Choice(("auto",)), Int(3, None))),
        "refine_hyper": AnyOf((_BOOL, Choice(("auto",)))),
    },
    doc="exact Gaussian process (closed-form leave-one-out)",
    seed="random_state",
    exports=_TOP,
)
register_base(
    "sparse-gp",
    "calibprob.bases.gp:SparseGaussianProcessRegressor",
    options=_GP_OPTIONS
    | {
        "n_inducing": Int(1, 100_000),
        "jitter": Float(0, 1, lo_open=True, hi_open=True),
        "inducing_points": ListOf(ListOf(Float())),
        # sparse GP at scale (issue 21): multi-start on a seeded subset of rows, refined on all
        "n_hyper_subset": AnyOf((Choice(("auto",)), Int(3, None))),
    },
    doc="sparse (inducing-point) Gaussian process",
    seed="random_state",
    exports=_TOP,
)
register_base(
    "ols",
    "calibprob.bases.linear:LinearRegression",
    options={"fit_intercept": _BOOL},
    doc="ordinary least squares, Student-t predictive",
    exports=_TOP,
)
register_base(
    "bayesian-ridge",
    "calibprob.bases.linear:BayesianRidge",
    options={
        "fit_intercept": _BOOL,
        "max_iter": Int(1, 1_000_000),
        "tol": _POS,
        "alpha_init": _POS,
        "lambda_init": _POS,
    },
    doc="Bayesian ridge regression (evidence maximisation)",
    exports=_TOP,
)
register_base(
    "pymc-linear",
    "calibprob.bases.pymc_linear:PyMCLinearRegression",
    options={
        "likelihood": Choice(("normal", "student-t")),
        "standardize": _BOOL,
        "inference": Choice(("nuts", "advi")),
        "draws": Int(10, 1_000_000),
        "tune": Int(0, 1_000_000),
        "chains": Int(1, 64),
        "target_accept": _PROB,
        "n_iter": Int(1, 10_000_000),
        "nu": AnyOf((Float(0, None, lo_open=True), Choice(("learn",)))),
        "prior": Choice(("normal", "laplace")),
        "noise_prior": Choice(("exponential", "halfnormal")),
        "noise_prior_scale": Float(0, None, lo_open=True),
        "log_likelihood": _BOOL,
    },
    doc="PyMC linear regression; its posterior-predictive draws go to the calibrators",
    seed="random_state",
    exports=_TOP,
)
register_base(
    "pymc-hsgp",
    "calibprob.bases.pymc_hsgp:PyMCHSGPRegression",
    options={
        "m": AnyOf((Int(2, 4000), ListOf(Int(2, 4000)))),
        "c": Float(1, None, lo_open=True),
        "kernel": Choice(("se", "matern52", "matern32")),
        "inference": Choice(("nuts", "advi")),
        "draws": Int(10, 1_000_000),
        "tune": Int(0, 1_000_000),
        "chains": Int(1, 64),
        "target_accept": _PROB,
        "n_iter": Int(1, 10_000_000),
    },
    doc="PyMC Hilbert-space approximate GP (pm.gp.HSGP) for tens of thousands of rows; posterior-predictive draws",
    seed="random_state",
    exports=_TOP,
)
register_base(
    "python",
    None,
    options={"entry": Str()},
    doc="your own model: entry = 'package.module:factory' (imports and runs your code)",
    builder="calibprob.bases.user:build_python_base",
)

# --- method kinds: the recalibration baselines (Capone et al. 2023 §7) -------------------
_CAL = ("calibprob", "calibprob.calibrators")
#: ``calibration_data = "loo"``: calibrate on the training part's leave-one-out predictive (a GP's closed
#: form, a PyMC base's PSIS-LOO) instead of the calibration part; absent, the calibration part as before
_LOO_OPTION: dict[str, Any] = dict(runner_options=("calibration_data",))
_CALIBRATION_DATA = {"calibration_data": Choice(("in-sample", "loo"))}
#: base kinds that give a training-part leave-one-out predictive (``loo()`` or ``loo_tree()``); ``python``
#: bases are checked when they run
LOO_BASES = ("gp", "sparse-gp", "pymc-linear", "pymc-hsgp", "python")
register_method(
    "base",
    None,
    family="distribution",
    output="distribution",
    doc="The uncalibrated base model's predictive distribution (B).",
    adapter="calibprob.compare.methods:run_base",
)
register_method(
    "isotonic",
    "calibprob.calibrators.recalibration:IsotonicRecalibrator",
    family="distribution",
    output="distribution",
    options={"extrapolate": _BOOL, **_CALIBRATION_DATA},
    doc="Kuleshov et al. 2018 isotonic recalibration of the base's PIT values (RK).",
    exports=_CAL,
    **_LOO_OPTION,
)
register_method(
    "vovk",
    "calibprob.calibrators.recalibration:VovkRecalibrator",
    family="distribution",
    output="distribution",
    options={"extrapolate": _BOOL, "random_state": Int(0, 2**63 - 1), **_CALIBRATION_DATA},
    doc="Vovk et al. 2020 randomized conformal calibrator of the base's PIT values (RV).",
    seed="random_state",
    exports=_CAL,
    **_LOO_OPTION,
)
register_method(
    "marx",
    "calibprob.calibrators.recalibration:MarxRecalibrator",
    family="distribution",
    output="distribution",
    options={"center": Choice(("mean", "median")), "extrapolate": _BOOL, **_CALIBRATION_DATA},
    doc="Marx et al. 2022 constant offsets around the base's mean (RM).",
    exports=_CAL,
    **_LOO_OPTION,
)
register_method(
    "variance-scaling",
    "calibprob.calibrators.recalibration:VarianceScalingRecalibrator",
    family="distribution",
    output="distribution",
    options=_CALIBRATION_DATA,
    doc="One factor on the base's standard deviation, fitted by calibration-set NLL.",
    exports=_CAL,
    **_LOO_OPTION,
)

# --- conformal ------------------------------------------------------------------------------
_CONF = (*_TOP, "calibprob.calibrators.conformal")
register_method(
    "split-conformal",
    "calibprob.calibrators.conformal.distribution:SplitConformalCalibrator",
    family="distribution",
    output="distribution",
    options={"score": _SCORE, **_CONFORMAL, **_CALIBRATION_DATA},
    doc="Split conformal around the base's predictive mean; a conformal quantile function.",
    fixed={"confidence_level": 0.5},
    needs_calibration_split=True,
    exports=_CONF,
    **_LOO_OPTION,
)
register_method(
    "conformal-predictive",
    "calibprob.calibrators.conformal.predictive_system:ConformalPredictiveSystem",
    family="distribution",
    output="distribution",
    options={"normalize": _BOOL, **_CONFORMAL, **_CALIBRATION_DATA},
    doc="Split conformal predictive system (Vovk et al. 2020): a full predictive CDF per test point.",
    fixed={"confidence_level": 0.5},
    needs_calibration_split=True,
    hidden=("chunk_size",),
    exports=_CONF,
    **_LOO_OPTION,
)
_CROSS: dict[str, Any] = dict(
    family="model-aware",
    output="intervals",
    seed="random_state",
    hidden=("chunk_size",),
    adapter="calibprob.compare.methods:run_cross_conformal",
)
register_method(
    "jackknife",
    "calibprob.calibrators.conformal.jackknife:CrossConformalRegressor",
    options={"score": _SCORE, **_CONFORMAL},
    doc="Jackknife (Pion eq. 6): leave-one-out residuals around the full-data fit; n refits.",
    fixed={"method": "base", "cv": "loo"},
    exports=_CONF,
    **_CROSS,
)
register_method(
    "jackknife-plus",
    "calibprob.calibrators.conformal.jackknife:CrossConformalRegressor",
    options={"score": _SCORE, **_CONFORMAL},
    doc="Jackknife+ (Barber et al. 2021): n refits of the base, coverage >= 2c - 1.",
    fixed={"method": "plus", "cv": "loo"},
    **_CROSS,
)
register_method(
    "cv-plus",
    "calibprob.calibrators.conformal.jackknife:CrossConformalRegressor",
    options={"folds": Int(2, 100_000), "score": _SCORE, **_CONFORMAL},
    doc="CV+ (Barber et al. 2021): K refits of the base (`folds`, default 10).",
    fixed={"method": "plus"},
    defaults={"folds": 10},
    runner_options=("folds",),  # the adapter passes it as cv=folds
    **{**_CROSS, "hidden": ("chunk_size", "cv")},
)
_GP_CONF: dict[str, Any] = dict(
    family="model-aware",
    output="intervals",
    # exact GP: closed-form LOO; sparse GP: its O(n m^2) closed-form LOO (calibprob.bases.gp._sparse_loo)
    serves=("gp", "sparse-gp"),
    hidden=("chunk_size",),
    adapter="calibprob.compare.methods:run_gp_conformal",
)
register_method(
    "jackknife-plus-gp",
    "calibprob.calibrators.conformal.gp:JackknifePlusGP",
    options={"refit_mean": _BOOL, **_CONFORMAL},
    doc="J+GP (Pion & Vazquez 2024 eq. 11-12): jackknife+ on the GP's closed-form LOO, no refit.",
    fixed={"score": "normalized"},
    exports=_CONF,
    **{**_GP_CONF, "hidden": ("chunk_size", "convention")},  # one symmetric rank: no tail convention
)
register_method(
    "asym-jackknife-plus-gp",
    "calibprob.calibrators.conformal.gp:JackknifePlusGP",
    options={"refit_mean": _BOOL, "convention": Choice(("barber", "pion2024")), **_CONFORMAL},
    doc="asymJ+GP (Pion eq. 13-14): signed normalised LOO scores, one rank per tail.",
    fixed={"score": "signed"},
    **_GP_CONF,
)
register_method(
    "full-conformal-gp",
    "calibprob.calibrators.conformal.gp:FullConformalGP",
    options={"refit_mean": _BOOL, **_CONFORMAL},
    doc="Full-conformal GP (Papadopoulos 2023; Pion eq. 9-10): exact, no candidate grid.",
    exports=_CONF,
    **_GP_CONF,
)

register_method(
    "loo-jackknife-plus",
    "calibprob.calibrators.conformal.loo_jackknife:LOOJackknifePlus",
    family="model-aware",
    output="intervals",
    options={"score": Choice(("absolute", "normalized"))},
    doc="Jackknife+ from one posterior: PSIS-LOO weights for the n refits, coverage >= 2c - 1 up to PSIS error.",
    serves=("pymc-linear", "pymc-hsgp"),
    seed="random_state",
    hidden=("chunk_size", "prefit"),
    adapter="calibprob.compare.methods:run_loo_jackknife",
    exports=("calibprob", "calibprob.calibrators"),
)

# --- Bayesian calibrators ----------------------------------------------------------------------
register_method(
    "conformal-bayes",
    "calibprob.calibrators.conformal.bayes:ConformalBayes",
    family="posterior",
    output="intervals",
    options={
        "grid_size": Int(10, 100_000),
        "grid_margin": _POS,
        "min_grid_mass": _PROB,
        "min_ess": _POS,
        "max_pareto_k": _POS,
        "pareto_k": _BOOL,
    },
    doc="Conformal Bayes (Fong & Holmes 2021): full-conformal sets from the PyMC base's posterior, no calibration split.",
    serves=("pymc-linear",),
    runner_options=("grid_size", "grid_margin"),
    defaults={"grid_size": 100, "grid_margin": 2.0},
    hidden=("block_rows", "unseen_group"),  # memory tuning; specs carry no groups for it yet
    adapter="calibprob.compare.methods:run_conformal_bayes",
)
register_method(
    "gp-beta",
    "calibprob.calibrators.gp_beta:GPBetaCalibrator",
    family="distribution",
    output="distribution",
    options={
        "n_inducing": Int(1, 10_000),
        "rank": Int(1, 100),
        "inference": Choice(("advi", "fullrank_advi", "svi", "map", "nuts")),
        "draws": Int(1, 1_000_000),
        "n_iter": Int(1, 10_000_000),
        "learning_rate": _POS,
        "obj_n_mc": Int(1, 10_000),
        "batch_size": AnyOf((Int(1, None), Choice(("auto",)))),
        "learn_inducing": _BOOL,
        "tune": Int(0, 1_000_000),
        "chains": Int(1, 64),
        "target_accept": _PROB,
        "n_grid": Int(2, 100_000),
        "compile_mode": Str(),
        "calibration_data": Choice(("auto", "in-sample", "loo")),
    },
    doc="GP-Beta distribution calibration (Song et al. 2019), a PyMC model.",
    seed="random_state",
    defaults={"calibration_data": "auto"},
    runner_options=("calibration_data",),
    exports=_CAL,
)
register_method(
    "sharp-gp",
    "calibprob.calibrators.sharp_gp:SharpCalibratedGP",
    family="model-aware",
    output="distribution",
    options={
        "variant": Choice(("full", "scaled", "cross-fitted")),
        "n_levels": Int(2, 10_000),
        "include_noise": _BOOL,
        "fit_noise": _BOOL,
        "n_restarts": Int(1, 1000),
        "prior_sd": _POS,
        "fit_fraction": _PROB,
        "n_train_subset": Int(1, None),
        "maxiter": Int(1, 1_000_000),
        # large calibration sets (issue 21): theta on a seeded subset of calibration rows (beta on
        # all), and sigma only at the interpolation nodes with the quantile interpolated between them;
        # "auto" / unset n_restarts and warm_start switch to the large-N settings above 1000 rows
        "n_cal_subset": Int(2, None),
        "interpolate": Choice(("auto", "theta", "quantile")),
        "warm_start": _BOOL,
        "maxls": Int(1, 1000),
    },
    doc="Sharp calibrated GP (Capone et al. 2023), calibration hyperparameters by MAP per level.",
    seed="random_state",
    serves=("gp", "sparse-gp"),
    hidden=("blas_threads", "compile_mode", "base"),
    exports=(*_CAL,),
)

# --- conditional calibration (issue 30): CQR, conditional conformal ------------------------------
register_method(
    "cqr",
    "calibprob.calibrators.conformal.cqr:ConformalizedQuantileRegression",
    family="distribution",
    output="intervals",
    options={"variant": Choice(("symmetric", "asymmetric", "cqr-r", "cqr-m")), "eps": _NONNEG},
    doc="Conformalized quantile regression (Romano et al. 2019; CQR-r/CQR-m, Sesia & Candès 2020) of the base's quantiles.",
    needs_calibration_split=True,
    hidden=("missing_levels",),
    adapter="calibprob.compare.methods:run_cqr",
    exports=_CAL,
)
register_base(
    "quantile-gbm",
    "calibprob.bases.quantile_gbm:QuantileGradientBoosting",
    options={
        "levels": ListOf(_PROB),
        "max_iter": Int(1, 100_000),
        "learning_rate": _POS,
        "max_leaf_nodes": Int(2, 100_000),
        "min_samples_leaf": Int(1, 1_000_000),
    },
    doc="one scikit-learn HistGradientBoostingRegressor(loss='quantile') per level, rows sorted; quantiles (needs scikit-learn)",
    seed="random_state",
    exports=_TOP,
)
register_method(
    "conditional-conformal",
    "calibprob.calibrators.conformal.conditional:ConditionalConformal",
    family="distribution",
    output="intervals",
    options={"score": Choice(("absolute", "normalized")), "randomize": _BOOL, "random_state": Int(0, 2**63 - 1)},
    doc="Conditional conformal (Gibbs, Cherian & Candès 2023) over the intercept in a spec (groups from Python).",
    seed="random_state",
    needs_calibration_split=True,
    hidden=("feature_map", "intercept", "rank_deficient"),
    adapter="calibprob.compare.methods:run_conditional_conformal",
    exports=_CAL,
)
