"""Reference martingale values from crepes and MAPIE, for tests/monitoring/test_martingales.py.

Run with the peers' environment (crepes and MAPIE are not calibprob dependencies):

    /work/venvs/peers/bin/python benchmarks/make_martingale_reference.py

It writes tests/data/martingale_reference.npz: a seeded stream of 600 scores (400 exchangeable,
then 200 from a wider law: the martingales grow), crepes' smoothed p-values of it
(``semi_online_p_values(scores, seed=7)``) and the uniforms crepes drew for them
(``np.random.seed(7); np.random.rand(600)``), and on those p-values: crepes' ``SimpleJumper()``
(J = 0.01, eps in {-1, -.5, 0, .5, 1}), ``SleeperStayer()`` (R = 0.001, step bets G = 10),
``SimpleJumper(J=0.05, bf=EpsilonBettingFunction([-1, 0, 1]))``, and MAPIE's
``OnlineMartingaleTest`` jumper (jump 0.01, eps in {-1, 0, 1}) and plug-in martingale
(burn_in 100) fed the same p-values one by one.
"""

from __future__ import annotations

from pathlib import Path

import crepes
import mapie
import numpy as np
from crepes.martingales import EpsilonBettingFunction, SimpleJumper, SleeperStayer, semi_online_p_values
from mapie.exchangeability_testing import OnlineMartingaleTest

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "martingale_reference.npz"
SEED = 7


def mapie_path(p: np.ndarray, method: str) -> np.ndarray:
    """MAPIE's martingale on given p-values (its update() would compute its own from scores)."""
    omt = OnlineMartingaleTest(test_method=method, jump_size=0.01, burn_in=100, random_state=0, warn=False)
    out = []
    for v in p:
        if method == "jumper_martingale":
            out.append(omt.update_simple_jumper_martingale(float(v)))
        else:
            out.append(omt.update_plugin_martingale(float(v)))
        omt.pvalue_history.append(float(v))  # what update() does after betting
    return np.array(out)


def main() -> None:
    rng = np.random.default_rng(2026)
    scores = np.abs(np.r_[rng.normal(size=400), 1.8 * rng.normal(size=200)])
    p = semi_online_p_values(scores, seed=SEED)
    np.random.seed(SEED)
    thetas = np.random.rand(scores.size)
    np.savez(
        OUT,
        scores=scores,
        thetas=thetas,
        pvalues=p,
        crepes_jumper=SimpleJumper().apply(p),
        crepes_sleeper_stayer=SleeperStayer().apply(p),
        crepes_jumper_j05_e3=SimpleJumper(J=0.05, bf=EpsilonBettingFunction([-1, 0, 1])).apply(p),
        mapie_jumper=mapie_path(p, "jumper_martingale"),
        mapie_plugin=mapie_path(p, "plugin_martingale"),
        versions=np.array([f"crepes {crepes.__version__}", f"mapie {mapie.__version__}"]),
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
