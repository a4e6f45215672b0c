"""Tests of calibprob/bo/ (a package so same-named test modules can coexist)."""
