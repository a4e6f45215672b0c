r"""Online quantile recalibration of any stream of forecasts (Deshpande et al. 2024, §4).

:class:`OnlineQuantileRecalibrator` wraps the NumPy layer of
``calibprob.calibrators.online._osd`` for forecasts in the predictive-distribution
contract (:mod:`calibprob.predictive`): ``recalibrate(forecast)`` issues
:math:`Q_t \circ R_t` as a new predictive Dataset, ``update(forecast, y)``
takes the outcomes (in ``obs`` order) and moves :math:`R_t` by one OSD step per
outcome. The state (latent iterates, issued map, coverage counts) saves to a
netCDF-able ``xr.Dataset`` and loads back exactly.

References
----------
Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
conformal prediction improves Bayesian optimization. AISTATS, eq. (8)-(11),
Theorems 2-3, Appendix G.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import special

from calibprob._core.estimator import BaseEstimator, check_predictive
from calibprob._core.validation import check_array, check_choice, check_levels, check_probability, check_targets
from calibprob.calibrators.conformal.mondrian import fit_with_groups, keep_group_coord, predict_with_groups
from calibprob.calibrators.online._osd import (
    COUPLINGS,
    coverage_bound,
    interpolate_map,
    osd_step,
    publish,
    theorem2_bound,
)
from calibprob.predictive import DEFAULT_LEVELS, from_quantiles

__all__ = ["OnlineQuantileRecalibrator", "check_eta"]


def check_eta(eta, name: str = "eta") -> float:
    r"""The OSD step size: a finite number > 0.

    Parameters
    ----------
    eta : float
        Candidate step size.
    name : str, default "eta"
        Name used in the error message.

    Returns
    -------
    float
        ``eta`` as a float.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and conformal
    prediction improves Bayesian optimization. AISTATS, Theorem 2 (:math:`\eta > 0`).

    Examples
    --------
    >>> from calibprob.calibrators.online import check_eta
    >>> check_eta(0.25)
    0.25
    >>> try:
    ...     check_eta(0.0)
    ... except ValueError:
    ...     print("eta must be > 0")
    eta must be > 0
    """
    try:
        value = float(eta)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a number > 0 (the online step size); got {eta!r}.") from err
    if not np.isfinite(value) or value <= 0:
        raise ValueError(
            f"{name} must be > 0 (the online gradient step size); got {eta!r}. "
            "Pass e.g. eta=0.25; larger steps adapt faster and tighten Theorem 2's bound "
            "(1 + eta)/(eta T), smaller ones fluctuate less."
        )
    return value


class OnlineQuantileRecalibrator(BaseEstimator):
    r"""Online quantile recalibrator: per-level online subgradient descent on the pinball loss.

    For every level :math:`p` of ``levels`` the recalibrated quantile issued at
    time :math:`t` is :math:`Q_t(R_t(p))`; after the outcome :math:`y_t`,

    .. math::

        \theta_{t+1}(p) = \theta_t(p) + \eta\,\bigl(p - o_t(p)\bigr), \qquad
        o_t(p) = \mathbb 1\{y_t \le Q_t(R_t(p))\} = \mathbb 1\{u_t \le R_t(p)\},

    where :math:`u_t = F_t(y_t)` is the outcome's PIT under the *base*
    forecast, :math:`\theta_1(p) = p` (the identity) and :math:`R_t` is the
    monotone map issued from the latent iterates :math:`\theta_t` (see
    ``coupling``). This is FTRL on the linearised quantile pinball loss,
    eq. (9)/(11) of the paper.

    Guarantee (any sequence, adversarial included): with
    ``coupling="independent"`` Theorem 2 holds exactly for each level's
    iterates, :math:`|\frac1T\sum_t o_t(p) - p| \le (1+\eta)/(\eta T)`; with
    ``coupling="isotonic"`` the same holds for the *issued* monotone map with
    the level-dependent constant of :func:`calibprob.calibrators.online.coverage_bound`
    (equal to Theorem 2's for a single level).

    Parameters
    ----------
    levels : array_like, shape (L,), optional
        Levels :math:`p` at which :math:`R_t` is tracked, strictly increasing
        in (0, 1); default :data:`calibprob.predictive.DEFAULT_LEVELS`.
        :math:`R_t` between them is linear (:func:`calibprob.calibrators.online.interpolate_map`).
    eta : float, default 0.25
        OSD step size :math:`\eta > 0`. Default rationale: after 25 outcomes
        (a typical Bayesian-optimisation budget) Theorem 2's bound
        :math:`(1+\eta)/(\eta T)` is 0.2, while one outcome moves a level by at
        most 0.25.
    coupling : {"isotonic", "independent"}, default "isotonic"
        How the levels are made monotone (the paper's Lemma 4 does not hold
        for eq. (9) as printed; see ``calibprob.calibrators.online._osd``).
        ``"isotonic"``: issue the isotonic regression of the iterates and take
        subgradients at the issued values (monotone *and* calibrated).
        ``"independent"``: eq. (9) per level, issue the sorted iterates
        (Theorem 2 exact for the iterates, not for the sorted map).
    level_floor : float, default 1e-3
        Issued probabilities are clipped to ``[level_floor, 1 - level_floor]``
        when a forecast is recalibrated: the paper's :math:`Q(q) = \mp\infty`
        for :math:`q` outside [0, 1] becomes the finite quantile at the floor
        (a Gaussian base at 1e-3 gives :math:`\mu \mp 3.09\sigma`). The state
        and the guarantee use the unclipped map.

    Attributes
    ----------
    theta_ : ndarray, shape (L,)
        Latent iterates :math:`\theta_t`.
    recalibration_ : ndarray, shape (L,)
        Issued map :math:`R_t(p_j)` (monotone, unclipped).
    hits_ : ndarray, shape (L,)
        :math:`\sum_{s<t} o_s(p_j)`: outcomes at or below the issued quantile.
    n_updates_ : int
        Number of outcomes seen, :math:`t - 1`.

    Notes
    -----
    An unupdated recalibrator is the identity :math:`R_1(p) = p` (the start of
    the recursion), so ``recalibrate`` works before any ``update``.

    References
    ----------
    Deshpande, S., Marx, C. and Kuleshov, V. (2024). Online calibrated and
    conformal prediction improves Bayesian optimization. AISTATS.

    Examples
    --------
    >>> import numpy as np, calibprob
    >>> from calibprob.calibrators.online import OnlineQuantileRecalibrator
    >>> rng = np.random.default_rng(0)
    >>> rec = OnlineQuantileRecalibrator(levels=[0.1, 0.5, 0.9], eta=0.5)
    >>> for t in range(200):   # a base forecast that is twice too narrow
    ...     f = calibprob.normal([0.0], [1.0], levels=[0.1, 0.5, 0.9])
    ...     _ = rec.update(f, [2.0 * rng.standard_normal()])
    >>> bool(np.all(np.abs(rec.hits_ / rec.n_updates_ - [0.1, 0.5, 0.9]) < 0.05))
    True
    """

    def __init__(self, *, levels=None, eta: float = 0.25, coupling: str = "isotonic", level_floor: float = 1e-3):
        self.levels = levels
        self.eta = eta
        self.coupling = coupling
        self.level_floor = level_floor

    # -- lifecycle ----------------------------------------------------------
    def _check_params(self):
        levels = DEFAULT_LEVELS if self.levels is None else check_levels(self.levels, "levels")
        eta = check_eta(self.eta)
        check_choice(self.coupling, "coupling", COUPLINGS)
        floor = check_probability(self.level_floor, "level_floor")
        if floor >= 0.5:
            raise ValueError(f"level_floor must be in (0, 0.5); got {floor!r}. Pass e.g. 1e-3.")
        return np.asarray(levels, float), eta, floor

    def reset(self) -> OnlineQuantileRecalibrator:
        """Start again from the identity map :math:`R_1(p) = p`; returns ``self``."""
        levels, _, _ = self._check_params()
        self.levels_ = levels
        self.theta_ = levels.copy()
        self.recalibration_ = levels.copy()
        self.hits_ = np.zeros(levels.size)
        self.n_updates_ = 0
        return self

    def _ensure_state(self):
        if getattr(self, "theta_", None) is None:
            self.reset()

    def _mondrian_sides(self) -> int:
        """0: no finite-sample minimum group size (Theorem 2 holds on any stream, however short)."""
        return 0

    def fit(self, forecast: xr.Dataset, y, *, groups=None) -> OnlineQuantileRecalibrator:
        """Reset to the identity, then :meth:`update` on the whole stream; returns ``self``.

        With ``groups=`` (one label per observation, or an ``obs`` coordinate name) each group
        runs its own stream (:class:`calibprob.Mondrian`), in ``obs`` order within the group.
        """
        if fit_with_groups(self, forecast, y, groups):
            return self
        return self.reset().update(forecast, y)

    def update(self, forecast: xr.Dataset, y) -> OnlineQuantileRecalibrator:
        """Take outcomes ``y`` of the *base* forecasts, one OSD step each, in ``obs`` order.

        Parameters
        ----------
        forecast : xarray.Dataset
            Base (not recalibrated) predictive distributions, ``n`` observations.
        y : array_like, shape (n,)
            Outcomes; must be finite.

        Returns
        -------
        self
        """
        forecast = check_predictive(forecast, self, "forecast")
        # one outcome per forecast, 1-D: a (n, 2) y would otherwise be read as 2n stream steps
        y = check_targets(y, forecast.sizes["obs"], "y", obs=forecast["obs"].values, ndim=1)
        u = np.asarray(forecast.calib.pit(y).values, float).reshape(-1)
        return self.update_pit(u)

    def update_pit(self, pit) -> OnlineQuantileRecalibrator:
        r"""Take outcomes given by their PIT values :math:`u_t = F_t(y_t)` under the base forecasts.

        Parameters
        ----------
        pit : array_like, shape (T,)
            Values in [0, 1], in stream order.

        Returns
        -------
        self
        """
        _, eta, _ = self._check_params()
        self._ensure_state()
        u = check_array(np.atleast_1d(pit), "pit", ndim=1, min_length=0)
        if u.size and (u.min() < 0 or u.max() > 1):
            raise ValueError(
                f"pit values must lie in [0, 1]; got range [{u.min():.3g}, {u.max():.3g}]. "
                "Pass F_t(y_t), the base forecast's CDF at the outcome."
            )
        theta = self.theta_
        for ut in u:
            theta, _, hit = osd_step(theta, self.levels_, float(ut), eta, self.coupling)
            self.hits_ = self.hits_ + hit
        self.theta_ = theta
        self.recalibration_ = publish(theta, self.coupling)
        self.n_updates_ += int(u.size)
        return self

    # -- the map -------------------------------------------------------------
    def recalibration_map(self, p=None, *, clip: bool = False) -> np.ndarray:
        r"""The issued map :math:`R_t(p)` at probabilities ``p`` (default: the tracked levels).

        Parameters
        ----------
        p : array_like, optional
            Probabilities in [0, 1]; linear interpolation between tracked levels.
        clip : bool, default False
            Clip to ``[level_floor, 1 - level_floor]`` (what :meth:`recalibrate` uses).

        Returns
        -------
        ndarray, shape of ``p`` (or (L,))
        """
        _, _, floor = self._check_params()
        self._ensure_state()
        if p is None:
            out = self.recalibration_.copy()
        else:
            p = np.asarray(p, float)
            if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
                raise ValueError(f"p must lie in [0, 1]; got {p!r}.")
            out = interpolate_map(self.levels_, self.recalibration_, p)
        return np.clip(out, floor, 1 - floor) if clip else out

    def standardized_quantiles(self, levels=None) -> np.ndarray:
        r"""Recalibrated standard-normal quantiles :math:`\Phi^{-1}(R_t(p))` (clipped), shape (L,).

        For a Gaussian base :math:`N(\mu, \sigma^2)` the recalibrated quantile
        function is :math:`\mu + \sigma\,\Phi^{-1}(R_t(p))`: a location-scale
        family, which is what the Bayesian-optimisation acquisitions use.
        """
        p = self.levels_ if levels is None else check_levels(levels)
        self._ensure_state()
        return special.ndtri(self.recalibration_map(p, clip=True))

    def coverage(self) -> np.ndarray:
        """Average coverage :math:`\\frac1T\\sum_t o_t(p_j)` so far, shape (L,) (NaN before any update)."""
        self._ensure_state()
        n = self.n_updates_
        return self.hits_ / n if n else np.full(self.levels_.size, np.nan)

    def coverage_bound(self) -> np.ndarray:
        """The proven bound on ``|coverage() - levels|`` after ``n_updates_`` outcomes, shape (L,)."""
        _, eta, _ = self._check_params()
        self._ensure_state()
        return coverage_bound(self.levels_, eta, max(self.n_updates_, 1), coupling=self.coupling)

    def theorem2_bound(self) -> float:
        r"""Theorem 2's :math:`(1+\eta)/(\eta T)` at :math:`T` = ``n_updates_``."""
        _, eta, _ = self._check_params()
        self._ensure_state()
        return float(theorem2_bound(eta, max(self.n_updates_, 1)))

    def predict(self, pred: xr.Dataset, *, levels=None, groups=None) -> xr.Dataset:
        """The recalibrated predictive distribution (the contract's name for :meth:`recalibrate`).

        ``fit(pred_cal, y_cal)`` then ``predict(pred)`` as every distribution
        post-processor; ``update`` continues the stream. ``groups=``: each row by its own
        group's stream (after a grouped :meth:`fit`).
        """
        mondrian = predict_with_groups(self, groups)
        if mondrian is not None:
            return mondrian.predict(pred, levels=levels, groups=groups)
        return keep_group_coord(self.recalibrate(pred, levels=levels), pred)

    def recalibrate(self, forecast: xr.Dataset, levels=None) -> xr.Dataset:
        r"""Issue :math:`Q_t \circ R_t`: the recalibrated predictive distribution.

        Parameters
        ----------
        forecast : xarray.Dataset
            Base predictive distributions (any family of the contract).
        levels : array_like, optional
            Levels of the output; default the forecast's own levels.

        Returns
        -------
        xarray.Dataset
            ``quantile(obs, level) = Q_i(R_t(p))`` with ``R_t`` clipped to
            ``[level_floor, 1 - level_floor]``; ``attrs["family"] == "quantile"``,
            ``attrs["method"]`` the base method + ``"+online-recalibration"``.
        """
        forecast = check_predictive(forecast, self, "forecast")
        self._ensure_state()
        out_levels = forecast.calib.levels if levels is None else check_levels(levels)
        p = self.recalibration_map(out_levels, clip=True)
        q = forecast.calib.family.ppf(p)  # Q_i(R_t(p)) for any family of the contract
        # ties from clipping are allowed; floating noise must not create crossings
        q = np.maximum.accumulate(q, axis=1)
        method = f"{forecast.attrs.get('method', 'forecast')}+online-recalibration"
        out = from_quantiles(q, out_levels, obs=forecast["obs"].values, method=method)
        out.attrs.update(
            {
                "recalibration_eta": float(self.eta),
                "recalibration_coupling": self.coupling,
                "recalibration_n_updates": int(self.n_updates_),
            }
        )
        return out

    # -- persistence -----------------------------------------------------------
    def to_dataset(self) -> xr.Dataset:
        """The full state as an ``xr.Dataset`` over ``level`` (saves to netCDF)."""
        self._check_params()
        self._ensure_state()
        ds = xr.Dataset(
            {
                "theta": ("level", self.theta_, {"long_name": "latent OSD iterates theta_t(p)"}),
                "recalibration": (
                    "level",
                    self.recalibration_,
                    {"long_name": "issued recalibration map R_t(p) (unclipped)"},
                ),
                "hits": ("level", self.hits_, {"long_name": "outcomes at or below the issued quantile"}),
            },
            coords={"level": self.levels_},
        )
        ds.attrs.update(
            {
                "estimator": type(self).__name__,
                "eta": float(self.eta),
                "coupling": str(self.coupling),
                "level_floor": float(self.level_floor),
                "n_updates": int(self.n_updates_),
                "reference": "Deshpande, Marx & Kuleshov (2024), Online calibrated and conformal "
                "prediction improves Bayesian optimization, AISTATS",
            }
        )
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> OnlineQuantileRecalibrator:
        """Rebuild a recalibrator (hyperparameters and state) from :meth:`to_dataset`'s output."""
        missing = [v for v in ("theta", "recalibration", "hits") if v not in ds]
        if missing or "level" not in ds.coords:
            raise ValueError(
                f"not an OnlineQuantileRecalibrator state: missing {missing or ['level']}. "
                "Pass the Dataset written by to_dataset()."
            )
        levels = np.asarray(ds["level"].values, float)
        est = cls(
            levels=levels,
            eta=float(ds.attrs["eta"]),
            coupling=str(ds.attrs["coupling"]),
            level_floor=float(ds.attrs.get("level_floor", 1e-3)),
        )
        est._check_params()
        est.levels_ = levels
        est.theta_ = np.asarray(ds["theta"].values, float).copy()
        est.recalibration_ = np.asarray(ds["recalibration"].values, float).copy()
        est.hits_ = np.asarray(ds["hits"].values, float).copy()
        # a per-step stack (the BO loop's ``recalibrator`` group) carries n_updates as a variable
        est.n_updates_ = int(ds["n_updates"].values) if "n_updates" in ds else int(ds.attrs.get("n_updates", 0))
        return est
