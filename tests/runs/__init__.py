"""Tests of calibprob/runs/ (a package so same-named test modules can coexist)."""
