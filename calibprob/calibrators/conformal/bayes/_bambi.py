r"""The bambi door to conformal Bayes: test log densities of a fitted ``bambi.Model`` on a grid.

bambi (Capretto et al. 2022) builds a PyMC model whose design matrices are constants, not
``pm.Data`` containers, so the PyMC door cannot swap in new inputs. bambi's own public calls
evaluate a fitted model at new rows, and this door uses only those:

* **closed form** (Gaussian and Student-t families): ``model.predict(idata, kind="response_params",
  data=X_new, inplace=False)`` gives the likelihood's parameters :math:`(\mu, \sigma[, \nu])` per
  draw at the new rows; the log density over the grid follows in NumPy;
* **logp** (any family bambi can score): the new rows are repeated once per grid value, the
  response column holds the grid, and ``model.compute_log_likelihood(..., data=rows)`` (PyMC's
  ``pm.logp`` of the family's distribution) scores them, blocked over test points.

The grid lives on the scale of the response column, so the response must be a plain column of
the data (not a transformation such as ``log(y)``).

References
----------
Capretto, T. et al. (2022). Bambi: a simple interface for fitting Bayesian linear models in
Python. Journal of Statistical Software 103(15).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from calibprob.calibrators.conformal.bayes import _inputs

#: bambi likelihood name -> (closed-form family, parameter names in that family's order)
_CLOSED_FORM = {"Normal": ("NormalRV", ("mu", "sigma")), "StudentT": ("StudentTRV", ("nu", "mu", "sigma"))}
#: Bytes a block of test log densities (draws x test points x grid) may take.
_BLOCK_BYTES = 64 * 2**20


def is_bambi_model(model: Any) -> bool:
    """Whether ``model`` is a ``bambi.Model`` (checked without importing bambi)."""
    return any(c.__module__.split(".")[0] == "bambi" and c.__name__ == "Model" for c in type(model).__mro__)


class BambiDoor:
    """A fitted bambi model, its response and its posterior, evaluated through bambi's own calls."""

    def __init__(self, model: Any, idata: Any) -> None:
        if getattr(model, "backend", None) is None:
            raise ValueError(
                "model: this bambi model has not been built; fit it first (idata = model.fit(...)), then call "
                "model.compute_log_likelihood(idata)."
            )
        self.model = model
        self.response = model.response_term.name
        if self.response not in model.data.columns:
            raise ValueError(
                f"model: the response {self.response!r} is not a column of the model's data (a transformed "
                "response); conformal Bayes places its grid in the response column. Transform the column "
                "first and build the model on it."
            )
        self.var_name = _aliased(model)  # the log_likelihood variable's name
        self.likelihood = model.family.likelihood.name
        # bambi evaluates on the posterior alone: a slim tree keeps its deep copies cheap
        self.slim = xr.DataTree.from_dict({"posterior": idata["posterior"].to_dataset()})
        sizes = idata["posterior"].sizes
        self.n_draws = int(np.prod([sizes[d] for d in _inputs.SAMPLE_DIMS if d in sizes]))

    def new_data(self, X_new: Any) -> Any:
        if not isinstance(X_new, pd.DataFrame):
            raise ValueError(
                f"X_new: a bambi model takes new rows as a pandas DataFrame with its predictor columns; got "
                f"{type(X_new).__name__}."
            )
        if len(X_new) == 0:
            raise ValueError("X_new: the DataFrame has no rows; pass one row per test point.")
        return X_new.reset_index(drop=True)

    @staticmethod
    def n_new(new: Any) -> int:
        return len(new)

    def choose(self, method: str) -> str:
        if method == "closed-form" and self.likelihood not in _CLOSED_FORM:
            raise ValueError(
                f"method='closed-form' covers the Gaussian and Student-t families; this bambi model's likelihood "
                f"is {self.likelihood}. Use method='logp'."
            )
        return "logp" if method == "logp" or self.likelihood not in _CLOSED_FORM else "closed-form"

    def closed_form_params(self, new: Any, m: int) -> tuple[str, list[np.ndarray]]:
        """The family and its parameters (draws, m) at the new rows, by bambi's ``predict``."""
        family, names = _CLOSED_FORM[self.likelihood]
        post = self.model.predict(self.slim, kind="response_params", data=new, inplace=False)["posterior"]
        return family, [self._per_draw(post[name], m) for name in names]

    def predictive_draws(self, new: Any, m: int, random_seed: Any) -> np.ndarray:
        """One posterior predictive draw per posterior draw at each new row, (draws, m), by bambi's ``predict``."""
        tree = self.model.predict(self.slim, kind="response", data=new, inplace=False, random_seed=random_seed)
        values, _ = _inputs.sample_matrix(tree["posterior_predictive"][self.response], "bambi predictive draws")
        return np.asarray(values, float).reshape(self.n_draws, m)

    def _per_draw(self, da: xr.DataArray, m: int) -> np.ndarray:
        """A parameter as (draws, m): per row (``__obs__``) or shared by the rows."""
        values, _ = _inputs.sample_matrix(da, "bambi parameter")
        return np.broadcast_to(values.reshape(self.n_draws, -1), (self.n_draws, m))

    def logp_blocks(self, new: Any, g: Any) -> Iterator[tuple[slice, np.ndarray]]:
        """bambi's log-likelihood of the rows (test row j, grid value y_g), blocked over test points."""
        m, G = g.shape
        per = max(1, _BLOCK_BYTES // (8 * self.n_draws * G))
        for start in range(0, m, per):
            sl = slice(start, min(start + per, m))
            b = sl.stop - sl.start
            rows = new.iloc[np.repeat(np.arange(sl.start, sl.stop), G)].reset_index(drop=True)  # row j * G + g
            rows[self.response] = g[sl].reshape(-1)
            tree = self.model.compute_log_likelihood(self.slim, data=rows, inplace=False)
            values, _ = _inputs.sample_matrix(tree["log_likelihood"][self.var_name], "bambi log-likelihood")
            yield sl, np.ascontiguousarray(values.reshape(self.n_draws, b, G))


def _aliased(model: Any) -> str:
    from bambi.utils import get_aliased_name

    return str(get_aliased_name(model.response_term))
