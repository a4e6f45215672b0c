"""The ridge base of Xu & Xie's (2021) EnbPI experiments, for ``models/xu2021-enbpi-solar.toml``.

The authors' ``RidgeCV(alphas=np.linspace(0.0001, 10, 10))`` (hamrel-cxu/EnbPI ``tests_paper+supp.py``),
as an instance a spec's ``kind = "python"`` base names (``entry = "calibprob.examples.enbpi_solar:ridge"``);
the runner copies it for every task (``sklearn.base.clone``). Needs scikit-learn.

References
----------
Xu, C. and Xie, Y. (2021). Conformal prediction interval for dynamic time-series. ICML, PMLR 139,
11559–11569.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import RidgeCV

__all__ = ["ridge", "ALPHAS"]

#: The authors' ridge penalties: ten values from 0.0001 to 10.
ALPHAS = np.linspace(0.0001, 10, 10)

#: The base: ridge regression with the penalty chosen by efficient leave-one-out among :data:`ALPHAS`.
ridge = RidgeCV(alphas=ALPHAS)
