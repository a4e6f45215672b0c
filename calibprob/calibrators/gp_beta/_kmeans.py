"""Inducing-point initialisation of GP-Beta: k-means++ seeding and Lloyd iterations."""

from __future__ import annotations

import numpy as np


def _kmeans(X: np.ndarray, k: int, rng: np.random.Generator, n_iter: int = 50) -> np.ndarray:
    """k-means++ seeding and Lloyd iterations (small, dependency-free)."""
    n = X.shape[0]
    centers = np.empty((k, X.shape[1]))
    centers[0] = X[rng.integers(n)]
    d2 = np.sum((X - centers[0]) ** 2, axis=1)
    for j in range(1, k):
        total = d2.sum()
        idx = rng.choice(n, p=d2 / total) if total > 0 else rng.integers(n)
        centers[j] = X[idx]
        d2 = np.minimum(d2, np.sum((X - centers[j]) ** 2, axis=1))
    for _ in range(n_iter):
        dist = np.sum((X[:, None, :] - centers[None, :, :]) ** 2, axis=2)
        lab = np.argmin(dist, axis=1)
        new = centers.copy()
        for j in range(k):
            members = X[lab == j]
            if members.size:
                new[j] = members.mean(axis=0)
            else:  # an empty cluster takes the point farthest from its centre
                far = int(np.argmax(dist[np.arange(n), lab]))
                new[j] = X[far]
        if np.allclose(new, centers):
            break
        centers = new
    return centers[np.lexsort((centers[:, 1], centers[:, 0]))]
