"""Tests of calibprob/calibrators/sharp_gp/ (a package so same-named test modules can coexist)."""
