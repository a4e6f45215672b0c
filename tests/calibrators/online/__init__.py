"""Tests of calibprob/calibrators/online/ (a package so same-named test modules can coexist)."""
