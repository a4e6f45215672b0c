"""Conformal prediction for time series and drift (issue 38).

- :class:`NexCP` — weighted split conformal with NexCP's fixed decaying weights
  (Barber, Candès, Ramdas & Tibshirani 2023), online through ``update``, its coverage-gap
  bound reported; :func:`full_conformal_ls` and :func:`nexcp_least_squares` — the paper's
  full-conformal least squares (CP+LS, nexCP+LS, nexCP+WLS) in closed form.
- :class:`EnbPI` — ensemble batch prediction intervals (Xu & Xie 2021) around any
  scikit-learn-style or calibprob estimator.
"""

from calibprob.calibrators.timeseries.enbpi import EnbPI, loo_aggregate
from calibprob.calibrators.timeseries.nexcp import NexCP, full_conformal_ls, nexcp_least_squares

__all__ = ["NexCP", "EnbPI", "full_conformal_ls", "nexcp_least_squares", "loo_aggregate"]
