"""Capone et al. (2023) Fig. 2-like toy: the sharp GP's 99 % interval vs RK, RV and RM.

A 1-D problem whose 30 training points leave a gap in [-1.2, 1.2]
(y = sin 2x + 0.3x + N(0, 0.1²)); a base GP fitted by maximum marginal
likelihood; 300 calibration and 4000 test points on [-4, 4]. The sharp
calibrated GP (all levels, Algorithm 1) and the recalibration baselines —
Kuleshov's isotonic (RK), Vovk's (RV) and Marx's offsets (RM) — are all
calibrated on the same 300 points. Printed: mean width and test coverage of
the centred 99 % interval (levels 0.005, 0.995) per method, per seed and on
average over ``--seeds`` seeds. Writes ``docs/_static/sharp-fig2.png`` (seed 0:
the data, the base GP's band, the sharp GP's and RK's 99 % bands).

The same construction is asserted by ``tests/calibrators/sharp_gp/test_sharp_gp.py``
(``test_fig2_toy_sharper_than_recalibration_baselines``, and over 8 seeds in
the slow ``test_fig2_toy_sharper_on_average_over_seeds``).

Run::

    .venv/bin/python benchmarks/sharp_fig2.py [--seeds 8] [--out docs/_static/sharp-fig2.png]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402

import numpy as np  # noqa: E402

from calibprob.bases.gp import GaussianProcessRegressor  # noqa: E402
from calibprob.calibrators import IsotonicRecalibrator, MarxRecalibrator, VovkRecalibrator  # noqa: E402
from calibprob.calibrators.sharp_gp import SharpCalibratedGP  # noqa: E402

LEVELS = np.array([0.005, 0.995])


def sample(rng, n, train=False):
    if train:  # a gap in the middle: the base GP is unsure there, sure elsewhere
        x = np.concatenate([rng.uniform(-4, -1.2, n // 2), rng.uniform(1.2, 4, n - n // 2)])
    else:
        x = rng.uniform(-4, 4, n)
    x = x[:, None]
    return x, np.sin(2 * x[:, 0]) + 0.3 * x[:, 0] + 0.1 * rng.normal(size=n)


def run(seed, grid=None):
    rng = np.random.default_rng(seed)
    Xtr, ytr = sample(rng, 30, train=True)
    Xc, yc = sample(rng, 300)
    Xt, yt = sample(rng, 4000)
    gp = GaussianProcessRegressor(random_state=0).fit(Xtr, ytr)
    sharp = SharpCalibratedGP(estimator=gp, random_state=0).fit(Xc, yc)
    recal = {"RK": IsotonicRecalibrator(), "RV": VovkRecalibrator(random_state=0), "RM": MarxRecalibrator()}
    pred_cal = gp.predict(Xc, levels=LEVELS)
    for cal in recal.values():
        cal.fit(pred_cal, yc)

    def bands(X):
        pred = gp.predict(X, levels=LEVELS)
        out = {"sharp GP": sharp.quantile(X, LEVELS), "base GP": pred.calib.quantiles}
        out.update({k: cal.predict(pred).calib.quantiles for k, cal in recal.items()})
        return out

    stats = {
        k: (float(np.mean(q[:, 1] - q[:, 0])), float(np.mean((yt >= q[:, 0]) & (yt <= q[:, 1]))))
        for k, q in bands(Xt).items()
    }
    picture = None if grid is None else (Xtr, ytr, Xc, yc, bands(grid))
    return stats, picture


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--out", default="docs/_static/sharp-fig2.png")
    args = ap.parse_args()
    grid = np.linspace(-4, 4, 400)[:, None]
    rows, picture = [], None
    for seed in range(args.seeds):
        stats, pic = run(seed, grid if seed == 0 else None)
        picture = picture or pic
        rows.append(stats)
        print(f"seed {seed}: " + ", ".join(f"{k} {w:.3f} @ {c:.3f}" for k, (w, c) in stats.items()))
    names = list(rows[0])
    print(f"\n99 % centred interval, mean over {args.seeds} seeds (4000 test points each)")
    print("| method | mean width | coverage | width / sharp GP's |")
    print("| --- | --- | --- | --- |")
    w_sharp = np.mean([r["sharp GP"][0] for r in rows])
    for k in names:
        w = np.mean([r[k][0] for r in rows])
        c = np.mean([r[k][1] for r in rows])
        print(f"| {k} | {w:.3f} | {c:.4f} | {w / w_sharp:.2f} |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Xtr, ytr, Xc, yc, bands = picture
    fig, ax = plt.subplots(figsize=(8, 4.2))
    x = grid[:, 0]
    ax.scatter(Xc[:, 0], yc, s=6, c="0.6", label="calibration data")
    ax.scatter(Xtr[:, 0], ytr, s=18, c="k", label="training data")
    style = {"base GP": ("C0", 0.15), "RK": ("C1", 0.0), "sharp GP": ("C3", 0.25)}
    for k, (colour, alpha) in style.items():
        q = bands[k]
        if alpha:
            ax.fill_between(x, q[:, 0], q[:, 1], color=colour, alpha=alpha, label=f"{k} 99 %")
        else:
            ax.plot(x, q[:, 0], color=colour, lw=1.5, label=f"{k} 99 %")
            ax.plot(x, q[:, 1], color=colour, lw=1.5)
    ax.set(xlabel="x", ylabel="y", title="99 % intervals after calibration on 300 points (seed 0)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
