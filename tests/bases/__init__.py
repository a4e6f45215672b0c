"""Tests of calibprob/bases/ (a package so same-named test modules can coexist)."""
