"""Tests of calibprob/calibrators/conformal/ (a package so same-named test modules can coexist)."""
