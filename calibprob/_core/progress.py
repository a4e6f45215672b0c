"""Progress lines for long work inside one call: conformal Bayes, its PyMC door, a large GP fit.

The comparison runner shows one bar over its tasks; the work inside a task (a GP base's fit, conformal
Bayes over thousands of test points) is silent there, because bars from parallel workers would
interleave. Called directly, the same work shows its own line, in the runner's style (``tqdm``), once it
has run for :data:`DELAY` seconds -- a call that finishes sooner prints nothing.

Whether a line shows, the first that applies:

1. the call's own ``progress=`` (``True`` / ``False``), where it has one
   (:class:`~calibprob.ConformalBayes`, :func:`~calibprob.conformal_bayes`);
2. :func:`show_progress` (``calibprob.show_progress(False)`` for the rest of the session, or
   ``with calibprob.show_progress(False): ...`` for a block), the same switch the runner's
   ``progress=False`` / ``--no-progress`` sets;
3. the environment variable ``CALIBPROB_PROGRESS`` (``0`` hides, ``1`` shows);
4. otherwise ``tqdm``'s own rule: shown when standard error is a terminal (or in a notebook).

Tasks of :func:`calibprob.runs.scheduling.run_map` run with the lines hidden (:class:`Quietly`), in
this process and on Dask workers alike.
"""

from __future__ import annotations

import contextvars
import os
from typing import Any

from tqdm.auto import tqdm

__all__ = ["DELAY", "Quietly", "bar", "show_progress"]

#: Seconds before a line appears: short calls stay silent.
DELAY = 2.0
#: Seconds between redraws of a line (``tqdm``'s default).
MIN_INTERVAL = 0.1

#: The session's (or block's) switch: ``None`` leaves the decision to the environment and ``tqdm``.
_SWITCH: contextvars.ContextVar[bool | None] = contextvars.ContextVar("calibprob_progress", default=None)


def _check_progress(progress: Any) -> bool | None:
    if progress is None or isinstance(progress, bool):
        return progress
    raise TypeError(f"progress must be True, False or None (automatic); got {progress!r}. Pass e.g. progress=False.")


def _decide(progress: bool | None) -> bool | None:
    """``True`` show, ``False`` hide, ``None``: ``tqdm`` decides (a terminal or a notebook shows)."""
    progress = _check_progress(progress)
    if progress is not None:
        return progress
    switch = _SWITCH.get()
    if switch is not None:
        return switch
    env = os.environ.get("CALIBPROB_PROGRESS", "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    return None


def bar(*, desc: str, unit: str, total: int | None = None, progress: bool | None = None) -> tqdm:
    """A progress line for one piece of long work (close it, or use it as a context manager).

    Parameters
    ----------
    desc, unit : str
        What is running and what one step counts (``"conformal Bayes"``, ``"test point"``).
    total : int, optional
        Steps in all; ``None`` when unknown (an optimiser's evaluations): the line then counts.
    progress : bool, optional
        The call's own setting; see the module's rules.
    """
    show = _decide(progress)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=None if show is None else not show,
        delay=DELAY,
        mininterval=MIN_INTERVAL,
        leave=False,  # a finished line clears itself: the result, not the bar, is what stays on screen
        dynamic_ncols=True,
    )


class show_progress:  # noqa: N801 - used like a function (as xarray's set_options)
    """Show or hide calibprob's progress lines, for the session or (as a context manager) for a block.

    Parameters
    ----------
    enabled : bool
        ``False`` hides every line (a call's own ``progress=True`` still shows its own);
        ``True`` shows them even when standard error is not a terminal.

    Examples
    --------
    >>> import calibprob
    >>> with calibprob.show_progress(False):
    ...     pass  # long calls here print no progress line
    """

    def __init__(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(
                f"show_progress takes True or False; got {enabled!r}. "
                "Use calibprob.show_progress(False) to hide progress lines."
            )
        self._token = _SWITCH.set(enabled)

    def __enter__(self) -> show_progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        _SWITCH.reset(self._token)


class Quietly:
    """``fn`` called with progress lines hidden (picklable, so a Dask worker runs it the same way)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with show_progress(False):
            return self.fn(*args, **kwargs)
