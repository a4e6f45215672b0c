"""Tests of calibprob/_core/ (a package so same-named test modules can coexist)."""
