r"""The definitions behind :func:`calibprob.datasets.get_function`: each test function's formula, box, known
minimum and minimisers (Surjanovic & Bingham, *Virtual Library of Simulation Experiments*, sfu.ca/~ssurjano)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


# ----------------------------------------------------------------- definitions
def _branin(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    b, c, r, s, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 6.0, 10.0, 1 / (8 * np.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * np.cos(x1) + s


def _goldstein_price(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    a = 1 + (x1 + x2 + 1) ** 2 * (19 - 14 * x1 + 3 * x1**2 - 14 * x2 + 6 * x1 * x2 + 3 * x2**2)
    b = 30 + (2 * x1 - 3 * x2) ** 2 * (18 - 32 * x1 + 12 * x1**2 + 48 * x2 - 36 * x1 * x2 + 27 * x2**2)
    return a * b


_HART_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_HART_A = np.array(
    [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ]
)
_HART_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ],
    dtype=float,
)


def _hartmann_sum(X: np.ndarray) -> np.ndarray:
    d = X.shape[1]
    A, P = _HART_A[:, :d], _HART_P[:, :d]
    sq = (X[:, None, :] - P[None, :, :]) ** 2  # (n, 4, d)
    return np.exp(-(sq * A[None]).sum(axis=2)) @ _HART_ALPHA


def _hartmann4(X: np.ndarray) -> np.ndarray:
    return (1.1 - _hartmann_sum(X)) / 0.839


def _hartmann6(X: np.ndarray) -> np.ndarray:
    return -_hartmann_sum(X)


def _park(X: np.ndarray) -> np.ndarray:
    x1, x2, x3, x4 = X.T
    return 2.0 / 3.0 * np.exp(x1 + x2) - x4 * np.sin(x3) + x3


def _forrester(X: np.ndarray) -> np.ndarray:
    x = X[:, 0]
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def _ackley(X: np.ndarray, a: float = 20.0, b: float = 0.2, c: float = 2 * np.pi) -> np.ndarray:
    d = X.shape[1]
    r = np.sqrt((X**2).sum(axis=1) / d)
    # Same value as -a e^{-b r} - e^{mean cos(c x)} + a + e, written with expm1 and
    # 1 - cos t = 2 sin^2(t/2) so that it is exactly 0 at the origin (no a + e - a - e rounding)
    m = (2 * np.sin(c * X / 2) ** 2).sum(axis=1) / d
    return -a * np.expm1(-b * r) - np.e * np.expm1(-m)


def _alpine(X: np.ndarray) -> np.ndarray:
    return np.abs(X * np.sin(X) + 0.1 * X).sum(axis=1)


def _six_hump_camel(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return (4 - 2.1 * x1**2 + x1**4 / 3) * x1**2 + x1 * x2 + (-4 + 4 * x2**2) * x2**2


def _cosines(X: np.ndarray) -> np.ndarray:
    u = 1.6 * X - 0.5
    return (u**2 - 0.3 * np.cos(3 * np.pi * u)).sum(axis=1) - 1.0


def _beale(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return (1.5 - x1 + x1 * x2) ** 2 + (2.25 - x1 + x1 * x2**2) ** 2 + (2.625 - x1 + x1 * x2**3) ** 2


def _mccormick(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return np.sin(x1 + x2) + (x1 - x2) ** 2 - 1.5 * x1 + 2.5 * x2 + 1


def _powers(X: np.ndarray) -> np.ndarray:
    exps = np.arange(2, X.shape[1] + 2)
    return (np.abs(X) ** exps).sum(axis=1)


def _cross_in_tray(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    inner = np.abs(np.sin(x1) * np.sin(x2) * np.exp(np.abs(100 - np.sqrt(x1**2 + x2**2) / np.pi)))
    return -1e-4 * (inner + 1) ** 0.1


def _dropwave(X: np.ndarray) -> np.ndarray:
    r2 = X[:, 0] ** 2 + X[:, 1] ** 2
    return -(1 + np.cos(12 * np.sqrt(r2))) / (0.5 * r2 + 2)


def _rosenbrock(X: np.ndarray) -> np.ndarray:
    return (100 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (X[:, :-1] - 1) ** 2).sum(axis=1)


_SFU = "Surjanovic & Bingham, Virtual Library of Simulation Experiments (sfu.ca/~ssurjano)"
_CIT = 1.3494066086020836  # cross-in-tray minimiser coordinate (polished numerically)


@dataclass(frozen=True)
class _Definition:
    name: str
    f: Callable
    dim: int | None  # None: any dimension
    box: tuple  # (lo, hi) per coordinate for fixed dim; one (lo, hi) repeated otherwise
    minimum: float | Callable[[int], float]
    minimizers: Callable[[int], np.ndarray]
    formula: str
    aliases: tuple[str, ...] = ()
    min_dim: int = 1


def _const(points: ArrayLike) -> Callable[[int], np.ndarray]:
    arr = np.atleast_2d(np.asarray(points, dtype=float))
    return lambda d: arr


_SPECS: dict[str, _Definition] = {
    s.name: s
    for s in (
        _Definition(
            "branin",
            _branin,
            2,
            ((-5.0, 10.0), (0.0, 15.0)),
            5 / (4 * np.pi),
            _const([[-np.pi, 12.275], [np.pi, 2.275], [3 * np.pi, 2.475]]),
            r"(x_2 - \tfrac{5.1}{4\pi^2}x_1^2 + \tfrac{5}{\pi}x_1 - 6)^2 + 10(1 - \tfrac{1}{8\pi})\cos x_1 + 10",
            aliases=("branin_hoo",),
        ),
        _Definition(
            "goldstein_price",
            _goldstein_price,
            2,
            ((-2.0, 2.0), (-2.0, 2.0)),
            3.0,
            _const([[0.0, -1.0]]),
            r"[1 + (x_1+x_2+1)^2(19 - 14x_1 + 3x_1^2 - 14x_2 + 6x_1x_2 + 3x_2^2)]"
            r"[30 + (2x_1 - 3x_2)^2(18 - 32x_1 + 12x_1^2 + 48x_2 - 36x_1x_2 + 27x_2^2)]",
            aliases=("goldstein", "goldsteinprice"),
        ),
        _Definition(
            "hartmann4",
            _hartmann4,
            4,
            ((0.0, 1.0),) * 4,
            -3.1344941412224,
            _const([[0.18739527350596863, 0.19415153024283222, 0.5579177805255784, 0.2647796243284079]]),
            r"\frac{1}{0.839}\Big(1.1 - \sum_{i=1}^4 \alpha_i \exp\big(-\sum_{j=1}^4 A_{ij}(x_j - P_{ij})^2\big)\Big)",
            aliases=("hartmann_4", "hart4"),
        ),
        _Definition(
            "hartmann6",
            _hartmann6,
            6,
            ((0.0, 1.0),) * 6,
            -3.322368011415515,
            _const(
                [
                    [
                        0.20168951165743917,
                        0.15001069588230606,
                        0.47687397444804136,
                        0.2753324310749464,
                        0.3116516165405256,
                        0.6573005315483755,
                    ]
                ]
            ),
            r"-\sum_{i=1}^4 \alpha_i \exp\big(-\sum_{j=1}^6 A_{ij}(x_j - P_{ij})^2\big)",
            aliases=("hartmann_6", "hart6"),
        ),
        _Definition(
            "park",
            _park,
            4,
            ((0.0, 1.0),) * 4,
            2.0 / 3.0,
            _const([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]),
            r"\tfrac{2}{3} e^{x_1 + x_2} - x_4 \sin x_3 + x_3",
            aliases=("park91b", "park2"),
        ),
        _Definition(
            "forrester",
            _forrester,
            1,
            ((0.0, 1.0),),
            -6.020740055767083,
            _const([[0.7572487573190114]]),
            r"(6x - 2)^2 \sin(12x - 4)",
        ),
        _Definition(
            "ackley",
            _ackley,
            None,
            (-32.768, 32.768),
            0.0,
            lambda d: np.zeros((1, d)),
            r"-20\exp\big(-0.2\sqrt{\tfrac{1}{d}\sum_i x_i^2}\big) - \exp\big(\tfrac{1}{d}\sum_i \cos 2\pi x_i\big) + 20 + e",
        ),
        _Definition(
            "alpine",
            _alpine,
            None,
            (-10.0, 10.0),
            0.0,
            lambda d: np.zeros((1, d)),
            r"\sum_i |x_i \sin x_i + 0.1 x_i|",
            aliases=("alpine1", "alpine_n1"),
        ),
        _Definition(
            "six_hump_camel",
            _six_hump_camel,
            2,
            ((-2.0, 2.0), (-1.0, 1.0)),
            -1.0316284534898774,
            _const([[0.08984201164977734, -0.7126564041106396], [-0.08984201164977734, 0.7126564041106396]]),
            r"(4 - 2.1x_1^2 + x_1^4/3)x_1^2 + x_1x_2 + (-4 + 4x_2^2)x_2^2",
            aliases=("camel", "sixhumpcamel", "camel6"),
        ),
        _Definition(
            "cosines",
            _cosines,
            2,
            ((0.0, 1.0), (0.0, 1.0)),
            -1.6,
            _const([[0.3125, 0.3125]]),
            r"\sum_{i=1}^2 \big(u_i^2 - 0.3\cos(3\pi u_i)\big) - 1,\ u_i = 1.6x_i - 0.5",
        ),
        _Definition(
            "beale",
            _beale,
            2,
            ((-4.5, 4.5), (-4.5, 4.5)),
            0.0,
            _const([[3.0, 0.5]]),
            r"(1.5 - x_1 + x_1x_2)^2 + (2.25 - x_1 + x_1x_2^2)^2 + (2.625 - x_1 + x_1x_2^3)^2",
        ),
        _Definition(
            "mccormick",
            _mccormick,
            2,
            ((-1.5, 4.0), (-3.0, 4.0)),
            -np.sqrt(3) / 2 - np.pi / 3,
            _const([[0.5 - np.pi / 3, -0.5 - np.pi / 3]]),
            r"\sin(x_1 + x_2) + (x_1 - x_2)^2 - 1.5x_1 + 2.5x_2 + 1",
        ),
        _Definition(
            "powers",
            _powers,
            None,
            (-1.0, 1.0),
            0.0,
            lambda d: np.zeros((1, d)),
            r"\sum_{i=1}^d |x_i|^{i+1}",
            aliases=("sum_of_different_powers", "sumpow"),
        ),
        _Definition(
            "cross_in_tray",
            _cross_in_tray,
            2,
            ((-10.0, 10.0), (-10.0, 10.0)),
            -2.0626118708227397,
            _const([[_CIT, _CIT], [_CIT, -_CIT], [-_CIT, _CIT], [-_CIT, -_CIT]]),
            r"-10^{-4}\Big(\big|\sin x_1 \sin x_2 \exp\big|100 - \tfrac{\sqrt{x_1^2 + x_2^2}}{\pi}\big|\big| + 1\Big)^{0.1}",
            aliases=("crossintray", "crossit"),
        ),
        _Definition(
            "dropwave",
            _dropwave,
            2,
            ((-5.12, 5.12), (-5.12, 5.12)),
            -1.0,
            _const([[0.0, 0.0]]),
            r"-\frac{1 + \cos(12\sqrt{x_1^2 + x_2^2})}{0.5(x_1^2 + x_2^2) + 2}",
            aliases=("drop_wave",),
        ),
        _Definition(
            "rosenbrock",
            _rosenbrock,
            None,
            (-5.0, 10.0),
            0.0,
            lambda d: np.ones((1, d)),
            r"\sum_{i=1}^{d-1} 100(x_{i+1} - x_i^2)^2 + (x_i - 1)^2",
            aliases=("rosen",),
            min_dim=2,
        ),
    )
}
