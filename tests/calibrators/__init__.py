"""Tests of calibprob/calibrators/ (a package so same-named test modules can coexist)."""
