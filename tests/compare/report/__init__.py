"""Tests of calibprob/compare/report/ (a package so same-named test modules can coexist)."""
