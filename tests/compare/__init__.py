"""Tests of calibprob/compare/ (a package so same-named test modules can coexist)."""
