r"""A shifted test set declared in a spec: rows of the test part drawn under an exponential tilt.

A data set entry with a ``shift`` table runs twice, side by side: as it is, and as
``"<name>-shifted"``, whose repetitions use the *same* train / calibration / test split (the
same task seed) but score on test rows drawn from the test part with probability proportional to

.. math::

    w(x) = \exp\Bigl(\sum_k a_k\, x_k\Bigr),

:math:`a_k` the ``tilt`` coefficients of the named (raw, unstandardised) columns. The draw is
the airfoil protocol's (Tibshirani et al. 2019, ``tibshirani2019/sim.airfoil.R``'s
``wsample``): rounds of independent acceptances :math:`U_i \le w(x_i)/\max_j w(x_j)` over the
test part until more than ``fraction`` of its rows are drawn (rows may repeat). The test inputs
then follow :math:`\tilde P_X \propto w\,P_X`, the law of :math:`Y \mid X` unchanged, and
:math:`w` is the *oracle* likelihood ratio a method's ``weights = "oracle"`` uses. Each shifted
repetition also records the covariate-shift diagnostic of its calibration and test inputs
(:func:`calibprob.metrics.covariate_shift`: ``shift_auc``, ``shift_pvalue``).

.. code-block:: toml

    datasets = [{ name = "airfoil", shift = { tilt = { log_Frequency = -1.0, log_Suction = 1.0 }, fraction = 0.25 } }]

References
----------
Tibshirani, R. J., Barber, R. F., Candès, E. J. and Ramdas, A. (2019). Conformal prediction
under covariate shift. NeurIPS 32, §4 (the airfoil experiment).
"""

from __future__ import annotations

import dataclasses
import difflib

import numpy as np
import xarray as xr

from calibprob.compare.spec.model import DatasetSpec, SpecError

__all__ = ["SHIFT_KEYS", "SHIFTED_SUFFIX", "parse_shift", "shifted_copy", "tilt_ratio", "draw_shifted"]

#: The keys of a data set's ``shift`` table.
SHIFT_KEYS = ("tilt", "fraction")
#: The name of a data set's shifted copy: ``"<name>" + SHIFTED_SUFFIX``.
SHIFTED_SUFFIX = "-shifted"


def _suggest(value: str, names: list[str]) -> str:

    close = difflib.get_close_matches(value, names, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def parse_shift(entry: dict, columns: tuple[list[str], str], where: str) -> dict | None:
    """The entry's validated ``shift`` table ``{"tilt": {column: coefficient}, "fraction": f}``, or None.

    Raises
    ------
    SpecError
        Not a table, an unknown key, a tilt on a column that does not exist (or on the target),
        a coefficient that is not a finite number, ``fraction`` outside (0, 1].
    """
    if "shift" not in entry:
        return None
    table = entry["shift"]
    if not isinstance(table, dict) or "tilt" not in table:
        raise SpecError(
            f"{where}.shift must be a table with a 'tilt' table of column = coefficient, e.g. "
            "shift = { tilt = { log_Frequency = -1.0, log_Suction = 1.0 }, fraction = 0.25 }."
        )
    unknown = sorted(str(k) for k in set(table) - set(SHIFT_KEYS))
    if unknown:
        raise SpecError(f"{where}.shift has unknown key(s) {unknown}; use only {list(SHIFT_KEYS)}.")
    tilt = table["tilt"]
    if not isinstance(tilt, dict) or not tilt:
        raise SpecError(f"{where}.shift.tilt must be a non-empty table of column = coefficient; got {tilt!r}.")
    names, target = columns
    out = {}
    for column, coef in tilt.items():
        if column not in names or column == target:
            what = "is the target" if column == target else "is not a column of the data"
            raise SpecError(
                f"{where}.shift.tilt names {column!r}, which {what}.{_suggest(str(column), names)} Tilt input "
                f"columns: {', '.join(n for n in names if n != target)}."
            )
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not np.isfinite(coef):
            raise SpecError(f"{where}.shift.tilt.{column} must be a finite number; got {coef!r}.")
        out[str(column)] = float(coef)
    fraction = table.get("fraction", 0.25)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise SpecError(f"{where}.shift.fraction must be a number in (0, 1]; got {fraction!r} (the protocol's 0.25).")
    return {"tilt": out, "fraction": float(fraction)}


def shifted_copy(d: DatasetSpec) -> DatasetSpec:
    """The shifted twin of an entry with a ``shift`` table: named ``<name>-shifted``, loading ``<name>``'s data."""
    return dataclasses.replace(d, name=d.name + SHIFTED_SUFFIX, source=d.name)


def tilt_ratio(part: xr.Dataset, shift: dict) -> np.ndarray:
    r"""The tilt :math:`w(x) = \exp(\sum_k a_k x_k)` at the rows of a data part (raw features), scaled by its max."""
    features = [str(f) for f in part["feature"].values]
    log_w = np.zeros(part.sizes["obs"])
    for column, coef in shift["tilt"].items():
        log_w += coef * part["X"].values[:, features.index(column)]
    return np.exp(log_w - log_w.max())


def draw_shifted(part: xr.Dataset, shift: dict, seed: int) -> np.ndarray:
    """Row positions of the shifted test set: ``wsample``'s rounds of tilted acceptances (rows may repeat)."""
    w = tilt_ratio(part, shift)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 39]))
    n = w.size
    rows: list[np.ndarray] = []
    drawn = 0
    while drawn <= shift["fraction"] * n:
        take = np.flatnonzero(rng.uniform(size=n) <= w / w.max())
        rows.append(take)
        drawn += take.size
    return np.concatenate(rows)


def oracle_weights(part: xr.Dataset, shift: dict) -> np.ndarray:
    """The oracle likelihood ratio at a part's rows (up to a constant, which cancels in every weighted rule)."""
    features = [str(f) for f in part["feature"].values]
    log_w = sum(coef * part["X"].values[:, features.index(c)] for c, coef in shift["tilt"].items())
    return np.exp(np.asarray(log_w, float))
