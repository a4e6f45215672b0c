"""Example user models that the shipped specs name by ``entry`` (e.g. ``models/radon.toml``).

They are written as a user would write them, against PyMC and pandas only, and live in the package so
that a shipped spec runs from ``calibprob compare`` without setting ``PYTHONPATH``; nothing in the
library imports them. :mod:`calibprob.examples.radon` is the Minnesota radon random-intercept model.
"""
