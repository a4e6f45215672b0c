r"""The Minnesota radon model of Gelman & Hill (2007, ch. 12) as a ``kind = "pymc-model"`` factory.

Homes :math:`i` within counties :math:`j[i]`, log radon :math:`y_i`:

.. math::

    y_i \sim \mathcal N(\alpha_{j[i]} + \beta\,\mathrm{basement}_i + \gamma\,\mathrm{uranium}_i, \sigma^2),\qquad
    \alpha_j = \mu_\alpha + \tau z_j,\quad z_j \sim \mathcal N(0, 1),

with :math:`\mu_\alpha, \beta, \gamma \sim \mathcal N(0, 5^2)` and :math:`\tau, \sigma \sim
\operatorname{HalfNormal}(1)` (non-centred: the few homes of most counties make the centred form
hard for NUTS). The county is read from the **text** column ``county.name`` as the data set has it;
its levels are the training rows' counties plus one ``"(new county)"`` level with no homes, whose
intercept is a draw from the population :math:`\mathcal N(\mu_\alpha, \tau^2)`: the prediction for a
county that the training part did not see.

Use it in a spec as::

    [bases.county]
    kind = "pymc-model"
    entry = "calibprob.examples.radon:county_intercept"

References
----------
Gelman, A. and Hill, J. (2007). *Data Analysis Using Regression and Multilevel/Hierarchical Models*.
Cambridge University Press, ch. 12 (the radon data, the varying-intercept model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["county_intercept", "CountyInputs", "NEW_COUNTY"]

#: The level of every county absent from the training rows.
NEW_COUNTY = "(new county)"


def county_intercept(data: pd.DataFrame, y: np.ndarray) -> tuple[Any, CountyInputs]:  # (pymc.Model, inputs)
    """Build (not sample) the varying-intercept model on the training rows; returns ``(model, inputs)``.

    Parameters
    ----------
    data : pandas.DataFrame
        The radon columns as the data set has them: ``basement``, ``uranium``, ``county``,
        ``county.name`` (text).
    y : numpy.ndarray
        Log radon of those homes.

    Returns
    -------
    (pymc.Model, callable)
        The model, with ``pm.Data`` containers ``basement``, ``uranium`` and ``county_idx``, and
        ``inputs(rows) -> {container: values}`` for new rows (a county by the training levels,
        an unseen one as :data:`NEW_COUNTY`).
    """
    import pymc as pm

    inputs = CountyInputs([*sorted(map(str, data["county.name"].unique())), NEW_COUNTY])
    start = inputs(data)
    with pm.Model(coords={"county": inputs.levels}) as model:
        basement = pm.Data("basement", start["basement"])
        uranium = pm.Data("uranium", start["uranium"])
        county = pm.Data("county_idx", start["county_idx"])
        mu_a = pm.Normal("mu_a", 0.0, 5.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="county")
        beta = pm.Normal("beta", 0.0, 5.0)
        gamma = pm.Normal("gamma", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        mu = mu_a + tau * z[county] + beta * basement + gamma * uranium
        pm.Normal("log_radon", mu, sigma, observed=np.asarray(y, dtype=float), shape=basement.shape[0])
    return model, inputs


class CountyInputs:
    """``rows -> {container: values}`` of :func:`county_intercept`: a county by its training level.

    A class (not a closure) so that a fitted base pickles, e.g. to travel to a Dask worker.

    Parameters
    ----------
    levels : list of str
        The training counties, then :data:`NEW_COUNTY`.
    """

    def __init__(self, levels: list[str]):
        self.levels = list(levels)
        self.code = {name: k for k, name in enumerate(self.levels)}

    def __call__(self, rows: pd.DataFrame) -> dict:
        new = self.code[NEW_COUNTY]
        return {
            "basement": rows["basement"].to_numpy(dtype=float),
            "uranium": rows["uranium"].to_numpy(dtype=float),
            "county_idx": np.asarray([self.code.get(c, new) for c in rows["county.name"].astype(str)], dtype=np.int64),
        }
