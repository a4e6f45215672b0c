"""netcal 1.4 ``GPBeta`` on the arrays saved by ``bench_gp_beta.py --save`` (the anchor of TARGETS.md P4).

Runs in a *separate* Python 3.11 environment with PyTorch and netcal — never in
calibprob's own. Build it once, e.g.::

    python3.11 -m venv /tmp/netcal-venv
    /tmp/netcal-venv/bin/pip install "torch==2.13.0"   # the CPU build (from this machine's local file)
    /tmp/netcal-venv/bin/pip install "netcal==1.4.0"

and run (``bench_gp_beta.py --netcal /tmp/netcal-venv/bin/python`` does this for you)::

    /tmp/netcal-venv/bin/python benchmarks/netcal_gpbeta.py /tmp/gpbeta_n1000.npz [16 [logpdf_out.npy [seed]]]

netcal's defaults (200 epochs, batch 256, Adam lr 1e-2, 128 MC samples) except
16 inducing points, as calibprob's run; one PyTorch thread, as calibprob's one
BLAS thread. The held-out density is netcal's own (the posterior-sample average
of the Beta-link density at each y_test). Prints one JSON line ``RESULT {...}``.
"""

import json
import sys
import time

import numpy as np
import torch


def main(path: str, n_inducing: int = 16, out: str | None = None, seed: int = 0) -> None:
    from netcal.regression import GPBeta

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    d = np.load(path)
    gp = GPBeta(n_inducing_points=n_inducing, n_random_samples=128, n_epochs=200, batch_size=256, lr=1e-2)
    t = time.perf_counter()
    gp.fit((d["mu"], d["sigma"]), d["y"])
    fit = time.perf_counter() - t
    t = time.perf_counter()
    _, pdf, _ = gp.transform((d["mu_test"], d["sigma_test"]), t=d["y_test"][None, :])
    predict = time.perf_counter() - t
    pdf = np.asarray(pdf, float).reshape(-1)
    if out:  # per-point log densities, for a paired comparison
        np.save(out, np.log(np.maximum(pdf, 1e-300)))
    print(
        "RESULT "
        + json.dumps(
            {
                "fit_s": fit,
                "predict_s": predict,
                "nll": float(-np.mean(np.log(np.maximum(pdf, 1e-300)))),
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *sys.argv[3:4], *(int(a) for a in sys.argv[4:5]))
