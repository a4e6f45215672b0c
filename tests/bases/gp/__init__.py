"""Tests of calibprob/bases/gp/ (a package so same-named test modules can coexist)."""
