"""The method registry: the one place that says which classes calibprob has and how they run.

Three tables, filled by the registration calls at the bottom of this module (and by
yours, for a calibrator or a base of your own):

* :data:`CLASSES` — every public estimator class by name: the module that exports it
  (``"module:Class"``, imported only when used, so nothing here imports PyMC), its role
  (``"calibrator"``, ``"base"`` or ``"helper"``), for a calibrator its *family*
  (``"distribution"``: a post-processor of the base's predictive distribution,
  ``fit(pred_cal, y_cal)``, ``predict(pred)``; ``"model-aware"``: ``estimator=``,
  ``fit(X, y)``, ``predict(X)``; see ``calibprob._core.estimator``) and its *output*
  (``"distribution"``: a quantile function; ``"intervals"``: central intervals only),
  and the namespaces that export it (``calibprob``, ``calibprob.calibrators``,
  ``calibprob.calibrators.conformal``);
* :data:`METHODS` — every calibrator *kind* a comparison spec can name
  (``[methods.NAME] kind = ...``): its class, the options a spec may give with their
  declared types (``calibprob._core.options``), the constructor arguments the kind fixes,
  the base kinds it can serve (GP-only methods) and, only where the family's lifecycle
  is not enough, an *adapter* ``"module:function"`` that runs it;
* :data:`BASES` — every base kind (``[base]`` / ``[bases.NAME]``), the same way.

Readers: the spec validator (:mod:`calibprob.compare.spec`), the runner's dispatch
(``calibprob.compare.methods``: the family decides the lifecycle, the output decides
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

from typing import Any

from calibprob._core.options import AnyOf, Bool, Choice, Float, Int, ListOf, Str, Theta
from calibprob.registry._tables import (
    BASES,
    CLASSES,
    FAMILIES,
    METHODS,
    OUTPUTS,
    RENAMED_BASE_KINDS,
    TASK_ARGUMENTS,
    BaseEntry,
    ClassEntry,
    MethodEntry,
    base_kind,
    current_options,
    exports,
    list_calibrators,
    load_object,
    register_base,
    register_class,
    register_method,
    render_bases_table,
    render_doc,
    render_kinds_table,
    update_doc,
)
from calibprob.registry._tables import DOC_BLOCKS as DOC_BLOCKS  # read by the docs test and update_doc
from calibprob.registry._tables import ROLES as ROLES
from calibprob.registry._tables import builtin_classes as builtin_classes  # calibprob.load's class table

__all__ = [
    "list_calibrators",
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
    "current_options",
    "RENAMED_BASE_KINDS",
    "exports",
    "load_object",
    "render_kinds_table",
    "render_bases_table",
    "render_doc",
    "update_doc",
]


# =====================================================================================
# The built-in classes, bases and method kinds
# =====================================================================================

_POS = Float(0, None, lo_open=True)
_NONNEG = Float(0, None)
_PROB = Float(0, 1, lo_open=True, hi_open=True)
_BOOL = Bool()
_SCORE = Choice(("absolute", "normalized", "signed", "signed-absolute"))
_CONFORMAL = {"beta": _POS, "eps": _NONNEG}
#: conformal PID control's options (Angelopoulos, Candès & Tibshirani 2023): the P step and how it is scaled,
#: the integrator's saturation and gain, the burn-in, the scorecaster; ``pid`` and ``online-recalibration``'s
#: ``rule = "pid"`` take the same ones
_PID = {
    "lr": _POS,
    "proportional_lr": Choice(("burnin", "rolling", "none")),
    "csat": _POS,
    "ki": _NONNEG,
    "burnin": Int(1, None),
    "scorecaster": Choice(("ar",)),
}
_TOP = ("calibprob",)

# --- helpers held by the estimators (saved and loaded with them) ---------------------
register_class(
    "calibprob.calibrators.conformal._intervals:CallableRegressor",
    role="helper",
    exports=("calibprob.calibrators.conformal",),
)
register_class("calibprob.datasets.splits:Standardizer", role="helper")
for _score in ("Score", "AbsoluteScore", "NormalizedScore", "SignedNormalizedScore", "SignedAbsoluteScore", "CQRScore"):
    register_class(
        f"calibprob.calibrators.conformal.scores:{_score}", role="helper", exports=("calibprob.calibrators.conformal",)
    )
# the Mondrian wrapper: a helper (it needs a calibrator and groups, so it has no default-built
# contract run); every post-processor reaches it through its own groups= argument
register_class("calibprob.calibrators.grouping.mondrian:Mondrian", role="helper", exports=("calibprob",))
register_class("calibprob.calibrators.grouping.bins:Bins", role="helper")

# --- calibrators that no spec kind names ------------------------------------------------
#: (class path, family, output, exports) of each, in registration order
_UNNAMED_CALIBRATORS = (
    ("calibprob.calibrators.online:OnlineQuantileRecalibrator", "distribution", "distribution", _TOP),
    ("calibprob.calibrators.online:AdaptiveConformalInterval", "distribution", "intervals", _TOP),
    # NexCP (issue 38): weighted split conformal with decaying weights, online through update
    ("calibprob.calibrators.timeseries:NexCP", "distribution", "intervals", (*_TOP, "calibprob.calibrators")),
    # EnbPI (issue 38): bootstrap ensemble, leave-one-out residuals, a sliding window
    ("calibprob.calibrators.timeseries:EnbPI", "model-aware", "intervals", (*_TOP, "calibprob.calibrators")),
    ("calibprob.calibrators.online:ConformalPIDInterval", "distribution", "intervals", _TOP),
    ("calibprob.calibrators.online:AgACIInterval", "distribution", "intervals", _TOP),
    (
        "calibprob.calibrators.conformal.split:SplitConformalRegressor",
        "model-aware",
        "distribution",
        (*_TOP, "calibprob.calibrators.conformal"),
    ),
    (
        "calibprob.calibrators.conformal.bayes.estimator:ConformalBayes",
        "posterior",
        "intervals",
        (*_TOP, "calibprob.calibrators"),
    ),
)
for _path, _family, _output, _exports in _UNNAMED_CALIBRATORS:
    register_class(_path, role="calibrator", family=_family, output=_output, exports=_exports)

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
        # exact GP at scale: hyperparameters on a seeded subset of rows, refined on all
        "n_hyper_subset": AnyOf((Choice(("auto",)), Int(3, None))),
        "refine_hyper": AnyOf((_BOOL, Choice(("auto",)))),
        # the runner's choice (calibprob.runs.faults.choose_gp): exact up to a documented size, sparse above
        "exact": _BOOL,
        "n_inducing": Int(1, 100_000),
    },
    doc="Gaussian process: exact (closed-form leave-one-out) up to 5 060 training rows, sparse above; exact = true forces exact",
    seed="random_state",
    runner_options=("exact", "n_inducing"),
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
        # sparse GP at scale: multi-start on a seeded subset of rows, refined on all
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
#: sampler settings of the two kinds that sample a user's model (defaults: calibprob.bases.pymc_model.SAMPLER_DEFAULTS)
_USER_SAMPLER = {
    "draws": Int(10, 1_000_000),
    "tune": Int(0, 1_000_000),
    "chains": Int(1, 64),
    "target_accept": _PROB,
}
register_base(
    "pymc-model",
    None,
    options={"entry": Str(), "var_name": Str(), **_USER_SAMPLER},
    doc="your own PyMC model: entry = 'package.module:factory', factory(data: DataFrame, y) -> pm.Model with "
    "pm.Data inputs (imports and runs your code)",
    builder="calibprob.bases.pymc_model:build_pymc_model_base",
)
register_base(
    "bambi",
    None,
    options={"formula": Str(), "family": Str(), **_USER_SAMPLER},
    doc="a bambi model: formula = 'y ~ x + (1|group)', optional family (default 'gaussian')",
    builder="calibprob.bases.pymc_model:build_bambi_base",
)
#: base kinds that see the data as the user has them: each part's raw DataFrame (text and group columns,
#: not one-hot encoded, not standardised) and the raw target; their predictions are on the target's scale
FRAME_BASES = ("pymc-model", "bambi")
#: base kinds that sample a posterior with log densities at new rows (conformal Bayes, LOO jackknife+)
POSTERIOR_BASES = ("pymc-linear", "pymc-model", "bambi")

# --- method kinds: the recalibration baselines (Capone et al. 2023 §7) -------------------
_CAL = ("calibprob", "calibprob.calibrators")
#: ``calibration_data = "loo"``: calibrate on the training part's leave-one-out predictive (a GP's closed
#: form, a PyMC base's PSIS-LOO) instead of the calibration part; absent, the calibration part as before
_LOO_OPTION: dict[str, Any] = dict(runner_options=("calibration_data",))
_CALIBRATION_DATA = {"calibration_data": Choice(("in-sample", "loo"))}
#: base kinds that give a training-part leave-one-out predictive (``loo()`` or ``loo_tree()``); ``python``
#: bases are checked when they run
LOO_BASES = ("gp", "sparse-gp", "pymc-linear", "pymc-hsgp", "python", *FRAME_BASES)
# --- online methods on a time split ([split] kind = "time"): fit on the burn-in, stream the horizon -----
# Any class with fit / predict / update runs the same way: register it with this adapter.
_ONLINE_ADAPTER = "calibprob.compare.online:run_online"
register_method(
    "aci",
    "calibprob.calibrators.online:AdaptiveConformalInterval",
    family="distribution",
    output="intervals",
    options={
        "gamma": _PROB,
        "window": Int(1, None),
        "infinite": Choice(("clip", "allow")),
        "score": Choice(("absolute", "normalized")),
        **_CONFORMAL,
    },
    doc="Adaptive conformal inference (Gibbs & Candès 2021) along a time split's horizon.",
    adapter=_ONLINE_ADAPTER,
    needs_calibration_split=True,
)
register_method(
    "online-recalibration",
    "calibprob.calibrators.online:OnlineQuantileRecalibrator",
    family="distribution",
    output="distribution",
    options={
        "rule": Choice(("osd", "aci", "dtaci", "pid")),
        "coupling": Choice(("isotonic", "independent")),
        **_PID,  # rule = "pid"
        "gammas": ListOf(_PROB),
        "eta": _POS,
        "gamma": _PROB,
        "window": Int(1, None),
        "level_floor": Float(0, 0.5, lo_open=True, hi_open=True),
        "regret_window": Int(1, None),
    },
    doc="Online quantile recalibration (Deshpande et al. 2024; rule = osd, aci, dtaci, pid) along a time split's horizon.",
    adapter=_ONLINE_ADAPTER,
    needs_calibration_split=True,
)
_SYMMETRIC_SCORE = Choice(("absolute", "normalized"))
register_method(
    "pid",
    "calibprob.calibrators.online:ConformalPIDInterval",
    family="distribution",
    output="intervals",
    options={
        **_PID,
        "score": _SYMMETRIC_SCORE,
        "allow_infinite": _BOOL,
        **_CONFORMAL,
    },
    doc="Conformal PID control (Angelopoulos, Candès & Tibshirani 2023) intervals along a time split's horizon.",
    adapter=_ONLINE_ADAPTER,
    needs_calibration_split=True,
)
register_method(
    "agaci",
    "calibprob.calibrators.online:AgACIInterval",
    family="distribution",
    output="intervals",
    options={"gammas": ListOf(_PROB), "window": Int(1, None), "score": _SYMMETRIC_SCORE, **_CONFORMAL},
    doc="AgACI (Zaffran et al. 2022): ACI experts aggregated online, along a time split's horizon.",
    adapter=_ONLINE_ADAPTER,
    needs_calibration_split=True,
)
register_method(
    "nexcp",
    "calibprob.calibrators.timeseries:NexCP",
    family="distribution",
    output="intervals",
    options={"rho": Float(0, 1, lo_open=True), "score": _SCORE, **_CONFORMAL},
    doc="NexCP (Barber et al. 2023): split conformal with decaying weights, updated along a time split's horizon.",
    adapter=_ONLINE_ADAPTER,
    needs_calibration_split=True,
)
register_method(
    "full-conformal-ls",
    None,
    family="model-aware",
    output="intervals",
    options={
        "rho": Float(0, 1, lo_open=True),
        "weighted_fit": _BOOL,
        "fit_intercept": _BOOL,
        "random_state": Int(0, 2**63 - 1),
    },
    doc="Full-conformal least squares refitted on the past at each step of a time split's horizon: CP+LS, "
    "nexCP+LS (rho) and nexCP+WLS (rho, weighted_fit) of Barber et al. 2023.",
    adapter="calibprob.compare.online:run_full_conformal_ls",
    needs_calibration_split=True,
)
register_method(
    "feedback-conformal",
    None,
    family="model-aware",
    output="intervals",
    options={"grid": ListOf(Float()), "shift": Choice(("feedback", "standard", "none"))},
    doc="Weighted full conformal of a designed test row under feedback covariate shift (Fannjiang et al. 2022), "
    "closed-form leave-one-out ridge, on a data set with a feedback table; grid = [start, stop, step] of labels.",
    adapter="calibprob.compare.feedback:run_feedback_conformal",
)
register_method(
    "enbpi",
    "calibprob.calibrators.timeseries:EnbPI",
    family="model-aware",
    output="intervals",
    options={
        "n_bootstraps": Int(2, 100_000),
        "aggregation": Choice(("mean", "median")),
        "center": Choice(("mean", "quantile")),
        "window": Int(1, None),
        "step": Int(1, None),
        "optimize_beta": _BOOL,
        "quantile_method": Choice(("linear", "higher", "lower", "nearest", "midpoint", "inverted_cdf")),
        "random_state": Int(0, 2**63 - 1),
    },
    doc="EnbPI (Xu & Xie 2021): bootstrap copies of the base fitted before a time split's horizon, a sliding "
    "window of leave-one-out residuals along it.",
    seed="random_state",
    adapter="calibprob.compare.online:run_enbpi",
    needs_calibration_split=True,
)
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
    "calibprob.calibrators.conformal.split_calibrator:SplitConformalCalibrator",
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
    options={"score": Choice(("signed", "signed-absolute")), **_CONFORMAL, **_CALIBRATION_DATA},
    doc="Split conformal predictive system (Vovk et al. 2020): a full predictive CDF per test point.",
    fixed={"confidence_level": 0.5},
    needs_calibration_split=True,
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
    serves=("pymc-linear", "pymc-hsgp", *FRAME_BASES),
    seed="random_state",
    hidden=("chunk_size", "prefit"),
    adapter="calibprob.compare.methods:run_loo_jackknife",
    exports=("calibprob", "calibprob.calibrators"),
)

# --- Bayesian calibrators ----------------------------------------------------------------------
register_method(
    "conformal-bayes",
    "calibprob.calibrators.conformal.bayes.estimator:ConformalBayes",
    family="posterior",
    output="intervals",
    options={
        "grid_size": Int(10, 100_000),
        "grid_margin": _POS,
        "min_grid_mass": _PROB,
        "min_ess": _POS,
        "max_pareto_k": _POS,
        "pareto_k": _BOOL,
        "grid_mode": Choice(("full", "ends")),
    },
    doc="Conformal Bayes (Fong & Holmes 2021): full-conformal sets from the PyMC base's posterior, no calibration split.",
    serves=POSTERIOR_BASES,
    runner_options=("grid_size", "grid_margin"),
    defaults={"grid_size": 100, "grid_margin": 2.0},
    # memory and thread tuning (n_jobs: the runner sets it from its own workers); specs carry no groups for it yet
    hidden=("chunk_size", "fallback", "n_jobs", "progress"),  # progress: runner tasks run silenced
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
        # large calibration sets: theta on a seeded subset of calibration rows (beta on
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
    hidden=("blas_threads", "compile_mode"),
    exports=(*_CAL,),
)

# --- conditional calibration: CQR, conditional conformal -----------------------------------------
register_method(
    "cqr",
    "calibprob.calibrators.conformal.cqr:ConformalizedQuantileRegression",
    family="distribution",
    output="intervals",
    options={"score": Choice(("symmetric", "asymmetric", "cqr-r", "cqr-m")), "eps": _NONNEG},
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
