"""Descriptive attributes (long name, definition, paper) of every metric variable."""

from __future__ import annotations

_PAPER_CAPONE = "Capone, Hirche & Pleiss (2023), Sharp calibrated Gaussian processes"
_PAPER_PION = "Pion & Vazquez (2024), Gaussian process interpolation with conformal prediction"
_PAPER_SONG = "Song, Diethe, Kull & Flach (2019), Distribution calibration for regression"
_PAPER_GNEITING = "Gneiting & Raftery (2007), Strictly proper scoring rules, prediction, and estimation"

_ATTRS = {
    "ece": {
        "long_name": "expected calibration error",
        "definition": "mean_j (mean_i 1[y_i <= Q_i(p_j)] - p_j)^2, p_j = j/(m-1), j = 0..m-1 "
        "(the mean over levels; Capone eq. 8 writes a sum, Table 1 uses the mean)",
        "paper": _PAPER_CAPONE + ", eq. (8)-(9), Table 1; Kuleshov et al. (2018)",
    },
    "iae": {
        "long_name": "integrated absolute error (miscalibration area)",
        "definition": "mean_k |coverage(1 - a_k) - (1 - a_k)|, a = linspace(0.02, 0.98, 20), central intervals",
        "paper": _PAPER_PION + ", Table 1; Marrel & Iooss (2024)",
    },
    "nll": {
        "long_name": "negative log predictive density",
        "definition": "-mean_i log f_i(y_i)",
        "paper": _PAPER_CAPONE + ", Table 1; " + _PAPER_SONG + ", Table 1",
    },
    "crps": {
        "long_name": "continuous ranked probability score",
        "definition": "mean_i int (F_i(x) - 1[y_i <= x])^2 dx = mean_i 2 int_0^1 rho_tau(y_i - Q_i(tau)) dtau (exact)",
        "paper": _PAPER_GNEITING,
    },
    "pinball": {
        "long_name": "mean pinball loss",
        "definition": "mean_{i,t} rho_tau_t(y_i - Q_i(tau_t)), tau = 0.05, 0.10, ..., 0.95",
        "paper": _PAPER_SONG + ", Table 1 (PBL)",
    },
    "mse": {
        "long_name": "mean squared error of the point prediction",
        "definition": "mean_i (y_i - yhat_i)^2",
        "paper": _PAPER_SONG + ", Table 1",
    },
    "rmse": {
        "long_name": "root mean squared error of the point prediction",
        "definition": "sqrt(mean_i (y_i - yhat_i)^2)",
        "paper": _PAPER_PION + ", Fig. 1",
    },
    "std": {
        "long_name": "mean predictive standard deviation",
        "definition": "mean_i sd_i (sharpness)",
        "paper": _PAPER_CAPONE + ", Table 1 (STD)",
    },
    "coverage": {
        "long_name": "empirical coverage of central intervals",
        "definition": "mean_i 1[Q_i((1-c)/2) <= y_i <= Q_i((1+c)/2)]",
        "paper": _PAPER_PION + ", eq. (1) and delta_{n,alpha}",
    },
    "width": {
        "long_name": "mean width of central intervals",
        "definition": "mean_i (Q_i((1+c)/2) - Q_i((1-c)/2))",
        "paper": _PAPER_CAPONE + ", Table 1 (95% CI); " + _PAPER_PION + ", Table 1 (90%W)",
    },
    "interval_score": {
        "long_name": "mean interval score (Winkler score) of central intervals",
        "definition": "mean_i [(u_i - l_i) + (2/a)(l_i - y_i) 1[y_i < l_i] + (2/a)(y_i - u_i) 1[y_i > u_i]], "
        "a = 1 - c, l_i = Q_i((1-c)/2), u_i = Q_i((1+c)/2); inf for an unbounded interval",
        "paper": _PAPER_GNEITING + ", eq. (43); Winkler (1972), A decision-theoretic approach to interval estimation",
    },
    "ueb_violation": {
        "long_name": "rate of uniform error bound violation",
        "definition": "mean_i 1[y_i outside [Q_i(p_min), Q_i(p_max)]], p_min/p_max the extreme stored levels",
        "paper": _PAPER_CAPONE + ", appendix Table 2 (RUEBV)",
    },
    "ueb_width": {
        "long_name": "mean length of the 100% interval",
        "definition": "mean_i (Q_i(p_max) - Q_i(p_min)), p_min/p_max the extreme stored levels",
        "paper": _PAPER_CAPONE + ", appendix Table 2 (Length of 100% CI)",
    },
    "observed_fraction": {
        "long_name": "observed fraction below the predicted quantile (calibration curve)",
        "definition": "mean_i 1[y_i <= Q_i(p)], Q_i(0) = -inf, Q_i(1) = +inf",
        "paper": _PAPER_CAPONE + ", eq. (9); Kuleshov et al. (2018)",
    },
    "iae_coverage": {
        "long_name": "empirical coverage of the IAE's central intervals",
        "definition": "mean_i 1[Q_i((1-c)/2) <= y_i <= Q_i((1+c)/2)], c = iae_level = 1 - alpha",
        "paper": _PAPER_PION,
    },
}
