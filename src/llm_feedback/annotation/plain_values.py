"""Table rows and values as plain Python, for records built from DataFrames (the
UltraFeedback export): None for every missing marker, Python scalars for numpy's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def plain(value: Any) -> Any:
    """pandas/numpy missing markers and numpy scalars as plain Python values.

    Args:
        value: a table value.

    Returns:
        The plain value (None for a missing one).
    """
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def float_or_none(value: Any) -> float | None:
    """A table value as a float, None when missing.

    Args:
        value: a table value.

    Returns:
        The float, or None.
    """
    value = plain(value)
    return None if value is None else float(value)


def string_list(value: Any) -> list[str]:
    # Lists come back from Parquet as numpy arrays; a missing list is an empty one.
    """A list cell as a list of texts.

    Args:
        value: a list cell (a list, an array or missing).

    Returns:
        The texts (empty when missing).
    """
    if value is None or value is pd.NA or isinstance(value, float):
        return []
    return [str(item) for item in value]


def row_dicts(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`frame.to_dict("records")`, a column at a time: pandas boxes each value on its own,
    which was half the export's time. A missing text is None there too.

    Args:
        frame: the table.

    Returns:
        One dict per row.
    """
    columns = [
        [None if value is pd.NA else value for value in frame[name].tolist()]
        if isinstance(frame[name].dtype, pd.StringDtype)
        else frame[name].tolist()
        for name in frame.columns
    ]
    names = list(frame.columns)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
