r"""A feedback-shift task of a comparison: the designed test row, and the conformal sets on a label grid.

A data set entry with a ``feedback`` table (:mod:`calibprob.compare.spec.feedback`) runs one task per
(inverse temperature :math:`\lambda`, repetition). :func:`feedback_arrays` draws the task's parts from
the repetition's seed in the order of the authors' loop (clarafy/conformal-for-design,
``benchmarks/repro_fluorescence_feedback.py``):

1. ``rng = default_rng(seed)`` draws the ``n_train`` training rows (uniform, with replacement) and
   ``noise = default_rng([seed, 1])`` their labels :math:`\max(N(y_i, \mathrm{sd}_i^2), \text{floor})`;
2. the ridge :math:`\hat\mu` fitted on them is evaluated on the whole pool;
3. for each :math:`\lambda` of the table *in its order*, up to the task's own, ``rng`` draws a test row
   from :math:`\tilde p(x) \propto \exp(\lambda\hat\mu(x))` (uniform at :math:`\lambda = 0`) and
   ``noise`` its label; the task keeps the last one. The earlier draws only advance the two streams,
   so that the test rows of one seed are the script's, draw for draw, whichever :math:`\lambda` a task runs.

:func:`run_feedback_conformal` (method kind ``feedback-conformal``) gives the weighted full-conformal set
(:func:`calibprob.calibrators.conformal.feedback.feedback_conformal_set`, closed-form leave-one-out
updates, no refits) of the test row at each of the spec's confidence levels: weights recomputed per
candidate label (``shift = "feedback"``, Fannjiang et al. 2022), from the model fitted on the training
rows (``"standard"``, Tibshirani et al. 2019's weighted conformal, which over-covers here) or none. It
returns the set's hull as an interval and the set itself (:data:`GRID_SETS`), which
:func:`grid_set_scores` scores: covered when a label of the set lies within half a grid step of the
true label (the authors' ``calibrate.is_covered``), width the set's measure (its labels times the step).

References
----------
Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022). Conformal
prediction under feedback covariate shift for biomolecular design. PNAS 119(43), e2204569119.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from calibprob.calibrators.conformal.feedback import RidgeSmoother, feedback_conformal_set
from calibprob.compare.spec.feedback import design_features
from calibprob.compare.spec.model import DatasetSpec
from calibprob.predictive import from_intervals

__all__ = ["GRID_SETS", "feedback_arrays", "draw_designed", "label_grid", "run_feedback_conformal", "grid_set_scores"]

#: The attribute of a ``feedback-conformal`` prediction holding its sets (``in_set`` over obs, level, label).
GRID_SETS = "grid_sets"


def draw_designed(
    features: np.ndarray,
    y_true: np.ndarray,
    label_sd: np.ndarray,
    *,
    n_train: int,
    lambdas: Sequence[float],
    upto: int,
    smoother: RidgeSmoother,
    seed: int,
    label_floor: float | None = None,
) -> tuple[np.ndarray, np.ndarray, int, float]:
    r"""One repetition's training rows and the test row designed at ``lambdas[upto]``.

    Parameters
    ----------
    features : ndarray, shape (m, p)
        The model's features of the pool.
    y_true, label_sd : ndarray, shape (m,)
        True labels and noise standard deviations of the pool's rows.
    n_train : int
    lambdas : sequence of float
        The entry's inverse temperatures, in the spec's order.
    upto : int
        Index of the task's :math:`\lambda` (the draws of the earlier ones are made and dropped).
    smoother : RidgeSmoother
    seed : int
    label_floor : float, optional

    Returns
    -------
    (idx, y, t, y_t)
        Training rows of the pool and their labels, the test row and its label.
    """
    m = features.shape[0]
    rng = np.random.default_rng(seed)
    noise = np.random.default_rng([seed, 1])
    idx = rng.choice(m, n_train, replace=True)
    y = noise.normal(y_true[idx], label_sd[idx])
    if label_floor is not None:
        y = np.fmax(y, label_floor)
    mu = smoother.fit_predict(features[idx], y, features)
    t, y_t = -1, np.nan
    for lam in lambdas[: upto + 1]:
        if lam:
            z = lam * mu
            p = np.exp(z - z.max())  # the largest term exactly 1: no overflow at any lambda
            t = int(rng.choice(m, p=p / p.sum()))
        else:
            t = int(rng.choice(m))
        y_t = float(noise.normal(y_true[t], label_sd[t]))
        if label_floor is not None:
            y_t = max(y_t, label_floor)
    return idx, y, t, y_t


def _smoother(model: dict) -> RidgeSmoother:
    # column 0 is the intercept (Walsh-Hadamard's empty product, or the column design_features prepends)
    return RidgeSmoother(penalty=model["penalty"], unpenalized=(0,))


def feedback_arrays(d: DatasetSpec, data: xr.Dataset, seed: int) -> dict:
    """A feedback twin's parts: ``{"train": (X, y), "test": (x_t, [y_t]), "feedback": {...}}`` (no calibration part).

    ``data`` is the entry's rows as loaded (inputs and the target, the true labels); the noise SDs
    are the CSV's ``label_sd`` column (the parser refused ``dropna`` and ``subsample``, so the rows are
    the file's). ``feedback`` carries what the method needs: the task's ``lam``, the ``pool``'s
    features and the ``model`` table.
    """
    fb = d.feedback
    if fb is None or d.lam is None or d.path is None:
        raise ValueError(f"data set {d.name!r} has no feedback table; please report this.")
    features = design_features(data["X"].values, fb["model"], f"data set {d.name!r}")
    y_true = np.asarray(data["y"].values, float)
    sd = np.zeros(y_true.size)
    if fb["label_sd"] is not None:
        sd = pd.read_csv(d.path, usecols=[fb["label_sd"]])[fb["label_sd"]].to_numpy(float)
    idx, y, t, y_t = draw_designed(
        features,
        y_true,
        sd,
        n_train=fb["n_train"],
        lambdas=fb["lambda"],
        upto=list(fb["lambda"]).index(d.lam),
        smoother=_smoother(fb["model"]),
        seed=seed,
        label_floor=fb["label_floor"],
    )
    return {
        "train": (features[idx], y),
        "test": (features[t : t + 1], np.array([y_t])),
        "feedback": {"lam": d.lam, "pool": features, "model": dict(fb["model"]), "test_row": t},
    }


def label_grid(grid: Sequence[float]) -> np.ndarray:
    """The candidate labels of ``grid = [start, stop, step]``: ``start + k step`` up to ``stop`` (included).

    ``numpy.arange(start, stop + step / 2, step)``: ``[0, 2.2, 0.02]`` gives the authors'
    ``np.arange(0, 2.21, 0.02)``, the same 111 labels bit for bit.
    """
    start, stop, step = (float(v) for v in grid)
    return np.arange(start, stop + step / 2, step)


def run_feedback_conformal(ctx: Any, entry: Any, *, grid: Sequence[float], shift: str = "feedback") -> xr.Dataset:
    """Weighted full-conformal sets of the designed test row(s) at the spec's confidence levels (no refits).

    Parameters
    ----------
    ctx : calibprob.compare.methods.TaskContext
        A feedback twin's task (its ``feedback`` set); the base is not used.
    entry : calibprob.registry.MethodEntry
    grid : [start, stop, step]
        Candidate labels (:func:`label_grid`).
    shift : {"feedback", "standard", "none"}
        The weights (:func:`~calibprob.calibrators.conformal.feedback.feedback_conformal_set`).

    Returns
    -------
    xarray.Dataset
        ``lower``, ``upper`` over (obs, confidence_level): the set's smallest and largest labels widened by
        half a step (the grid cells of the set); attribute :data:`GRID_SETS`: ``in_set`` over (obs,
        confidence_level, label).
    """
    fb = ctx.feedback
    if fb is None:
        raise ValueError(
            f"kind {entry.kind!r} needs a data set with a feedback table (the design's pool, lambda and model); "
            'add feedback = { lambda = [...], n_train = ..., model = { kind = "ridge", ... } } to the data set entry.'
        )
    labels = label_grid(grid)
    step = float(grid[2])
    levels = np.asarray(ctx.confidence_levels, float)
    in_set = np.zeros((ctx.X_test.shape[0], levels.size, labels.size), bool)
    for i, x in enumerate(ctx.X_test):
        for j, level in enumerate(levels):
            cs = feedback_conformal_set(
                ctx.X_train,
                ctx.y_train,
                x,
                smoother=_smoother(fb["model"]),
                lam=fb["lam"],
                grid=labels,
                pool=fb["pool"],
                confidence_level=float(level),
                shift=shift,
                on_outside="ignore",  # a label outside the grid is simply not covered (the authors' rule)
            )
            in_set[i, j] = cs.in_set
    # the hull of each set's grid cells (an empty set: a zero-width interval at the grid's start)
    any_in = in_set.any(axis=2)
    lo = np.where(any_in, labels[np.argmax(in_set, axis=2)] - step / 2, labels[0])
    hi = np.where(any_in, labels[labels.size - 1 - np.argmax(in_set[..., ::-1], axis=2)] + step / 2, labels[0])
    sets = xr.Dataset(
        {"in_set": (("obs", "confidence_level", "label"), in_set)},
        coords={"confidence_level": levels, "label": labels},
        attrs={"step": step, "shift": shift},
    )
    return from_intervals(lo, hi, levels, method=entry.kind, attrs={GRID_SETS: sets}, check=False)


def grid_set_scores(out: xr.Dataset, sets: xr.Dataset, y: np.ndarray, levels: Sequence[float]) -> xr.Dataset:
    """``coverage``, ``width`` and ``median_width`` of grid sets, in place of their hulls' (``evaluate_intervals``).

    Covered: a label of the set within half a grid step of the true label (Fannjiang et al.'s
    ``calibrate.is_covered``); width: the set's measure, its number of labels times the step.
    """
    sets = sets.sel(confidence_level=list(levels))
    labels = sets["label"].values
    step = float(sets.attrs["step"])
    in_set = sets["in_set"].transpose("obs", "confidence_level", "label").values
    near = np.abs(labels[None, :] - np.asarray(y, float)[:, None]) < step / 2  # (obs, label)
    covered = (in_set & near[:, None, :]).any(axis=2)
    size = in_set.sum(axis=2) * step
    level = out["coverage"]["confidence_level"]
    out = out.copy()
    out["coverage"] = (level.dims, covered.mean(axis=0), out["coverage"].attrs)
    out["width"] = (level.dims, size.mean(axis=0), out["width"].attrs)
    out["median_width"] = (
        level.dims,
        np.median(size, axis=0),
        {"long_name": "median set size", "description": "median over the test rows of the set's labels x the step"},
    )
    return out
