"""Tests of calibprob/datasets/ (a package so same-named test modules can coexist)."""
