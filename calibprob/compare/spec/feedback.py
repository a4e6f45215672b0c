r"""A designed test point in a spec: feedback covariate shift (Fannjiang et al. 2022) from a data set's ``feedback`` table.

A CSV entry with a ``feedback`` table is not split. Its rows are a finite design *pool*
:math:`\mathcal X` with a true label each; every repetition draws ``n_train`` training rows uniformly
with replacement from the pool, labels them with measurement noise, fits the table's ``model``
:math:`\hat\mu` on them, and draws **one** test row from the design density

.. math::

    \tilde p(x) = \frac{\exp(\lambda\, \hat\mu(x))}{\sum_{u \in \mathcal X} \exp(\lambda\, \hat\mu(u))},
    \qquad x \in \mathcal X,

which depends on the training data through :math:`\hat\mu` (feedback covariate shift), with a noisy
label drawn the same way. The entry runs once per value of ``lambda``, as ``"<name>-lambda<λ>"``,
each sharing the repetition's training rows; the methods of kind ``feedback-conformal``
(:mod:`calibprob.compare.feedback`) give the weighted full-conformal set of the designed row on a
grid of candidate labels, and a repetition's coverage is 0 or 1 (its mean over repetitions is the
coverage of the paper's tables).

.. code-block:: toml

    [[datasets]]
    name = "fluorescence-blue"
    path = "data/fannjiang2022_fluorescence.csv"
    target = "brightness_blue"
    exclude = ["brightness_red", "red_se"]
    feedback = { lambda = [0, 2, 4, 6], n_train = 96, label_sd = "blue_se", label_floor = 0.0,
                 model = { kind = "ridge", penalty = 10.0, walsh_hadamard = 2 } }

Keys: ``lambda`` (the inverse temperatures, finite, distinct), ``n_train`` (training rows per
repetition, drawn with replacement), ``label_sd`` (optional: a column of per-row noise standard
deviations; the labels are :math:`N(y, \mathrm{sd}^2)`; absent: the column's values as they are),
``label_floor`` (optional: noisy labels below it are set to it, the authors' clip of brightness at 0),
``model`` (``kind = "ridge"`` with ``penalty`` :math:`\gamma > 0`, the intercept unpenalised; with
``walsh_hadamard = k`` its features are the products of the :math:`\pm 1`-coded binary inputs over
every subset of at most :math:`k` sites, the empty one the intercept; without it, the inputs and an
intercept column).

References
----------
Fannjiang, C., Bates, S., Angelopoulos, A. N., Listgarten, J. and Jordan, M. I. (2022). Conformal
prediction under feedback covariate shift for biomolecular design. PNAS 119(43), e2204569119.

Poelwijk, F. J., Socolich, M. and Ranganathan, R. (2019). Learning the pattern of epistasis linking
genotype and phenotype in a protein. Nat. Commun. 10, 4213.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import combinations

import numpy as np

from calibprob._core.options import SpecError, _short, _suggest
from calibprob.compare.spec.model import DatasetSpec

__all__ = [
    "FEEDBACK_KEYS",
    "FEEDBACK_MODEL_KEYS",
    "parse_feedback",
    "feedback_twins",
    "twin_name",
    "walsh_hadamard",
    "design_features",
]

#: The keys of a data set's ``feedback`` table.
FEEDBACK_KEYS = ("lambda", "n_train", "label_sd", "label_floor", "model")
#: The keys of its ``model`` table.
FEEDBACK_MODEL_KEYS = ("kind", "penalty", "walsh_hadamard")
#: Training rows per repetition: at least this many (a leave-one-out score needs company).
MIN_FEEDBACK_TRAIN = 2
#: At most this many (each repetition's smoother matrix is n_train x pool rows).
MAX_FEEDBACK_TRAIN = 100_000
_EXAMPLE = (
    'feedback = { lambda = [0, 2, 4, 6], n_train = 96, label_sd = "blue_se", '
    'model = { kind = "ridge", penalty = 10.0, walsh_hadamard = 2 } }'
)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parse_lambdas(value: object, where: str) -> tuple[float, ...]:
    """``lambda``: one finite number or a non-empty list of distinct finite numbers."""
    values: list = value if isinstance(value, list) else [value]
    if not values or not all(_number(v) and math.isfinite(v) for v in values):
        raise SpecError(
            f"{where}.lambda must be a finite number or a non-empty list of them (the design's inverse "
            f"temperatures); got {_short(value)}. E.g. lambda = [0, 2, 4, 6]."
        )
    lams = tuple(float(v) for v in values)
    if len(set(lams)) != len(lams):
        raise SpecError(f"{where}.lambda lists a value twice ({list(lams)}); give each inverse temperature once.")
    return lams


def _parse_model(value: object, n_inputs: int, where: str) -> dict:
    """``model``: ``{kind = "ridge", penalty > 0, walsh_hadamard = k}`` (k optional, 1..number of inputs)."""
    if not isinstance(value, dict) or value.get("kind") != "ridge":
        raise SpecError(
            f'{where}.model must be a table with kind = "ridge" (the design\'s model, linear in the labels, so '
            f'the conformal sets need no refits); got {_short(value)}. E.g. model = {{ kind = "ridge", '
            "penalty = 10.0, walsh_hadamard = 2 }."
        )
    unknown = sorted(str(k) for k in set(value) - set(FEEDBACK_MODEL_KEYS))
    if unknown:
        hint = _suggest(unknown[0], FEEDBACK_MODEL_KEYS)
        raise SpecError(f"{where}.model has unknown key(s) {unknown};{hint} use only {list(FEEDBACK_MODEL_KEYS)}.")
    penalty = value.get("penalty", 1.0)
    if not _number(penalty) or not math.isfinite(penalty) or penalty <= 0:
        raise SpecError(
            f"{where}.model.penalty must be a finite number > 0 (the ridge penalty; the intercept is not "
            f"penalised); got {_short(penalty)}. The authors use 10 for n_train = 96."
        )
    out: dict = {"kind": "ridge", "penalty": float(penalty)}
    if "walsh_hadamard" in value:
        order = value["walsh_hadamard"]
        if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= n_inputs:
            raise SpecError(
                f"{where}.model.walsh_hadamard must be an integer order from 1 to the number of inputs "
                f"({n_inputs}); got {_short(order)}. The authors use 2 (sites and pairs of sites)."
            )
        out["walsh_hadamard"] = int(order)
    return out


def parse_feedback(entry: dict, columns: list[str], target: str, n_inputs: int, where: str) -> dict | None:
    """The entry's validated ``feedback`` table, or None when it has none.

    Parameters
    ----------
    entry : dict
        The data set's table.
    columns : list of str
        The CSV's columns.
    target : str
        The target column (the true labels).
    n_inputs : int
        The number of input columns the entry keeps (``walsh_hadamard``'s largest order).
    where : str
        The entry's place in the spec, for the messages.

    Returns
    -------
    dict or None
        ``{"lambda": tuple, "n_train": int, "label_sd": str or None, "label_floor": float or None,
        "model": dict}``.

    Raises
    ------
    SpecError
        Not a table, an unknown key, a bad ``lambda``, ``n_train`` or ``model``, a ``label_sd`` that is not
        a column (or is the target).
    """
    if "feedback" not in entry:
        return None
    table = entry["feedback"]
    if not isinstance(table, dict):
        raise SpecError(f"{where}.feedback must be a table, e.g. {_EXAMPLE}.")
    unknown = sorted(str(k) for k in set(table) - set(FEEDBACK_KEYS))
    if unknown:
        hint = _suggest(unknown[0], FEEDBACK_KEYS)
        raise SpecError(f"{where}.feedback has unknown key(s) {unknown};{hint} use only {list(FEEDBACK_KEYS)}.")
    missing = [k for k in ("lambda", "n_train", "model") if k not in table]
    if missing:
        raise SpecError(f"{where}.feedback needs {', '.join(missing)}; e.g. {_EXAMPLE}.")
    n_train = table["n_train"]
    if (
        isinstance(n_train, bool)
        or not isinstance(n_train, int)
        or not MIN_FEEDBACK_TRAIN <= n_train <= MAX_FEEDBACK_TRAIN
    ):
        raise SpecError(
            f"{where}.feedback.n_train must be an integer from {MIN_FEEDBACK_TRAIN} to {MAX_FEEDBACK_TRAIN} (the "
            f"training rows drawn per repetition, with replacement); got {_short(n_train)}. E.g. n_train = 96."
        )
    label_sd = table.get("label_sd")
    if label_sd is not None and (not isinstance(label_sd, str) or label_sd not in columns or label_sd == target):
        what = "is the target" if label_sd == target else "is not a column of the data"
        raise SpecError(
            f"{where}.feedback.label_sd = {_short(label_sd)} {what}.{_suggest(str(label_sd), columns)} Name the "
            "column of each row's noise standard deviation, or leave label_sd out (labels without noise)."
        )
    floor = table.get("label_floor")
    if floor is not None and (not _number(floor) or not math.isfinite(floor)):
        raise SpecError(f"{where}.feedback.label_floor must be a finite number (e.g. 0.0); got {_short(floor)}.")
    return {
        "lambda": _parse_lambdas(table["lambda"], f"{where}.feedback"),
        "n_train": int(n_train),
        "label_sd": label_sd,
        "label_floor": None if floor is None else float(floor),
        "model": _parse_model(table["model"], n_inputs, f"{where}.feedback"),
    }


def twin_name(name: str, lam: float) -> str:
    """The name of an entry's run at inverse temperature ``lam``: ``"<name>-lambda<lam>"`` (``%g``)."""
    return f"{name}-lambda{lam:g}"


def feedback_twins(d: DatasetSpec) -> list[DatasetSpec]:
    """One data set per ``lambda`` of the entry's ``feedback`` table, each loading the entry's data."""
    assert d.feedback is not None  # the parser calls this for a feedback entry only
    return [dataclasses.replace(d, name=twin_name(d.name, lam), source=d.name, lam=lam) for lam in d.feedback["lambda"]]


def walsh_hadamard(bits: np.ndarray, order: int) -> np.ndarray:
    r"""Walsh--Hadamard features of binary inputs: :math:`\prod_{j \in S} (2 b_j - 1)` over every :math:`|S| \le` order.

    The empty subset (the intercept, a column of ones) first, then the subsets of size 1, 2, ... in
    :func:`itertools.combinations` order (the authors' ``assay.walsh_hadamard_from_seqs``): with 13 sites
    and order 2, 1 + 13 + 78 = 92 columns.

    Parameters
    ----------
    bits : ndarray, shape (m, L)
        0/1 inputs.
    order : int

    Returns
    -------
    ndarray, shape (m, sum_{k <= order} C(L, k))
    """
    signed = 2.0 * np.asarray(bits, float) - 1.0
    m, sites = signed.shape
    cols = [np.ones(m)]
    for k in range(1, order + 1):
        for idx in combinations(range(sites), k):
            cols.append(np.prod(signed[:, list(idx)], axis=1))
    return np.column_stack(cols)


def design_features(X: np.ndarray, model: dict, where: str) -> np.ndarray:
    """The model's features of the pool's inputs: Walsh--Hadamard (0/1 inputs only), or the inputs with an intercept.

    Raises
    ------
    ValueError
        ``walsh_hadamard`` on inputs that are not all 0 or 1.
    """
    order = model.get("walsh_hadamard")
    if order is None:
        return np.column_stack([np.ones(X.shape[0]), X])
    if not np.isin(X, (0.0, 1.0)).all():
        raise ValueError(
            f"{where}: feedback.model.walsh_hadamard codes binary inputs as +-1, but the inputs hold values other "
            "than 0 and 1; exclude the non-binary columns, or drop walsh_hadamard (the inputs as they are)."
        )
    return walsh_hadamard(X, order)
