"""Conformal calibrators (the new home by role, issue 27): the LOO jackknife+ from one posterior.

Classes are registered in :mod:`calibprob.registry` and exported lazily from
:mod:`calibprob`; import them from there.
"""
