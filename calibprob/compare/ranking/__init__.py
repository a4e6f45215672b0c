r"""Ranking pipelines per data set, with the paired uncertainty of every difference.

A *pipeline* is what the comparison table has one column for: today a
calibrator (the ``calibrator`` dimension of a results file); once a spec holds
several bases, a (base, calibrator) pair. Every function here stacks whichever
of the dimensions :data:`PIPELINE_DIMS` a results Dataset has into one
``pipeline`` dimension with string labels (``"gp/isotonic"``), so the ranking
works unchanged when a ``base`` dimension appears.

Two rankings are made per data set:

**By a proper score** (NLL by default, CRPS on request; both lower is better).
Repetitions share their split across pipelines, so differences are *paired*:
with :math:`s_{p,r}` the score of pipeline :math:`p` on repetition
:math:`r = 1..R` and :math:`b` the pipeline of lowest mean score,

.. math::

    d_{p,r} = s_{p,r} - s_{b,r}, \qquad
    \Delta_p = \frac1R \sum_r d_{p,r}, \qquad
    \mathrm{dse}_p = \frac{\sqrt R\,\operatorname{sd}_r(d_{p,r})}{R}
                   = \sqrt{\frac{\sum_r (d_{p,r}-\Delta_p)^2}{(R-1)\,R}} .

This is ``az.compare``'s ``dse`` (:math:`\sqrt{n}\,\operatorname{sd}` of the
pointwise differences of a *sum* over :math:`n` points) divided by :math:`R`,
because the ranked score is a *mean* over repetitions. A pipeline with
:math:`\Delta_p \le 2\,\mathrm{dse}_p` is marked **tied** with the best. With
one repetition dse is undefined (NaN) and nothing but the best is marked.
Random splits overlap, so repetitions are not independent and this plain paired
standard error is optimistic (Nadeau & Bengio 2003 inflate its variance by
:math:`1 + R\,n_\text{test}/n_\text{train}`); it is the one ``az.compare`` and
most benchmark papers report, and it is stated as such.

Intervals-only methods (jackknife+, J+GP, full conformal) have no NLL or CRPS:
they are left out of this ranking (``score_rank`` 0) and ranked only in the
interval one.

**Intervals, per confidence level** :math:`\alpha`. The mean coverage
:math:`\bar c_p` over repetitions has the standard error

.. math::

    \mathrm{se}_p = \max\Bigl(\sqrt{\alpha(1-\alpha)/N_p},\;
                             \operatorname{sd}_r(c_{p,r})/\sqrt{R_p}\Bigr),

the larger of the binomial one under exact nominal coverage
(:math:`N_p = \sum_r n_{\text{test},r}` test points pooled over the
:math:`R_p` repetitions where :math:`p` was scored) and the across-repetition
one (which also holds the variation of the fitted interval between splits,
but rests on few repetitions; NaN, so ignored, when :math:`R_p < 2`). A
pipeline **under-covers** when :math:`\bar c_p < \alpha - 2\,\mathrm{se}_p`;
it is never ranked by width (``width_rank`` 0). The others are ranked by mean
width with the same paired dse and tie rule as above.

**Worst-group coverage.** When the results carry the per-group diagnostics of
:func:`calibprob.evaluate` (``group_coverage`` and ``group_count``, stored by
the runner for a data set with groups), each group's coverage is pooled over
the repetitions, :math:`\hat c_g = \sum_r n_{g,r} c_{g,r} / N_g` with
:math:`N_g = \sum_r n_{g,r}`, and the worst group
:math:`g^* = \arg\min_g \hat c_g` has the binomial standard error under
nominal coverage :math:`\mathrm{se}_{g^*} = \sqrt{\alpha(1-\alpha)/N_{g^*}}`.
A pipeline with :math:`\hat c_{g^*} < \alpha - 2\,\mathrm{se}_{g^*}`
(``group_undercovers``) is never named best for width either: marginal coverage
can hide a failing group, and the printed ranking says which group
and by how much.

**Convergence of the base.** A base fitted by MCMC (``kind = "pymc-linear"``)
stores its diagnostics per task (root variables ``rhat``, the largest
rank-normalised split :math:`\hat R` over the parameters, and ``divergences``,
the divergent transitions after tuning). Where :math:`\hat R >` :data:`RHAT_MAX`
(1.01, Vehtari et al. 2021) or a transition diverged in any repetition, every
pipeline on that base is flagged (``base_flag``, the reason as text): its
scores come from a posterior that may not be the model's, so its place in the
ranking is not to be trusted until the sampler is run longer.

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved :math:`\hat R` for
assessing convergence of MCMC. Bayesian Analysis 16(2), 667-718.

Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model
evaluation using leave-one-out cross-validation and WAIC. Statistics and
Computing 27, 1413-1432 (§5.2: the standard error of a paired difference,
``az.compare``'s ``dse``).

Nadeau, C. and Bengio, Y. (2003). Inference for the generalization error.
Machine Learning 52, 239-281.

Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
prediction, and estimation. JASA 102(477), 359-378.
"""

from __future__ import annotations

from calibprob.compare.ranking.rank import (  # noqa: F401 (the ranking's public names, re-exported)
    CONVERGENCE_VARS,
    PIPELINE_DIMS,
    RANK_SCORES,
    RHAT_MAX,
    TIE_SE,
    convergence_flags,
    coverage_se,
    paired_ranking,
    rank_results,
    stack_pipelines,
    undercovers,
    worst_group_coverage,
)
from calibprob.compare.ranking.text import (  # noqa: F401
    NOT_CONVERGED,
    flag_notes,
    format_ranking,
    interval_rows,
    score_rows,
)

__all__ = [
    "PIPELINE_DIMS",
    "RANK_SCORES",
    "TIE_SE",
    "RHAT_MAX",
    "paired_ranking",
    "convergence_flags",
    "coverage_se",
    "undercovers",
    "worst_group_coverage",
    "stack_pipelines",
    "rank_results",
    "format_ranking",
]
