"""Tests of calibprob/calibrators/gp_beta/ (a package so same-named test modules can coexist)."""
