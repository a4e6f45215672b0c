"""Example user models that the shipped specs name by ``entry`` (e.g. ``models/radon.toml``).

They are written as a user would write them, against PyMC, pandas or scikit-learn, and live in the package so
that a shipped spec runs from ``calibprob compare`` without setting ``PYTHONPATH``; nothing in the
library imports them. :mod:`calibprob.examples.radon` is the Minnesota radon random-intercept model;
:mod:`calibprob.examples.enbpi_solar` the ridge of Xu & Xie's EnbPI experiments (scikit-learn's ``RidgeCV``
on the authors' penalty grid, for ``models/xu2021-enbpi-solar.toml``); :mod:`calibprob.examples.aci_prices`
the random forest of Zaffran et al.'s ACI experiments (for ``models/zaffran2022-aci-prices.toml``).
"""
