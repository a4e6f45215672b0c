"""Reading a results file: its scores (:func:`load_results`), and the pipelines as one ``calibrator`` dimension."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from calibprob.compare.ranking import stack_pipelines
from calibprob.runs import is_netcdf as _is_netcdf


def load_results(path: str | Path) -> xr.Dataset:
    """Load the metrics Dataset (root group) of a results file.

    Parameters
    ----------
    path : str or Path
        A results file written by :func:`run_comparison`.

    Returns
    -------
    xarray.Dataset

    References
    ----------
    The comparison-spec reference: :doc:`/spec`.

    Examples
    --------
    :doc:`/examples/comparison` runs one small comparison, once, and shows what
    ``load_results`` returns.

    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"results file {str(path)!r} does not exist. Produce one with `calibprob compare SPEC.toml --out FILE`."
        )
    hint = "Give a results file written by `calibprob compare SPEC.toml --out FILE`."
    if not _is_netcdf(path):
        raise ValueError(f"{str(path)!r} is not a netCDF file. {hint}")
    try:
        tree = xr.open_datatree(path, engine="h5netcdf")
    except Exception as err:  # damaged HDF5, classic netCDF-3, ...
        raise ValueError(
            f"{str(path)!r} could not be read as a netCDF-4 file ({type(err).__name__}: {err}). {hint}"
        ) from None
    try:
        ds = tree.to_dataset().load()
        if "timing" in tree.children:
            for name, var in tree["timing"].to_dataset().load().data_vars.items():
                ds[name] = var
    finally:
        tree.close()
    missing = [d for d in ("dataset", "calibrator", "repetition") if d not in ds.dims]
    if missing or "spec_fingerprint" not in ds.attrs:
        raise ValueError(
            f"{str(path)!r} is a netCDF file but not calibprob comparison results (no "
            f"{'dimension ' + ', '.join(map(repr, missing)) if missing else 'spec_fingerprint attribute'}). {hint}"
        )
    return ds


def _flat(results: xr.Dataset) -> xr.Dataset:
    """Results with a ``base`` dimension as one ``calibrator`` dimension labelled ``base/calibrator``.

    The table and the PNG plots show pipelines side by side; a one-base results file is returned as is.
    """
    if "base" not in results.dims:
        return results

    st = stack_pipelines(results)
    st = st.drop_vars([k for k in st.coords if str(k).startswith("pipeline_")]).rename(pipeline="calibrator")
    return st.transpose("dataset", "repetition", "calibrator", ...)
