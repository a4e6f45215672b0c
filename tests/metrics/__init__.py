"""Tests of calibprob/metrics/ (a package so same-named test modules can coexist)."""
