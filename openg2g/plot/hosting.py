"""What a hosting-capacity study's table says besides its figures, for the command line and the app
alike (``openg2g study`` prints it; ``openg2g app``'s hosting view shows it)."""

from __future__ import annotations

import pandas as pd

__all__ = ["baseline_warnings"]


def baseline_warnings(table: pd.DataFrame) -> dict[str, str]:
    """Controller -> why its hosting capacity is bounded before any site is placed: the feeder
    without the site (``baseline_*`` columns of the study's table) already breaks a limit. Only
    the controllers whose baseline breaks one.

    :param table: the study's table (``hosting_capacity.parquet``), one or more rows per controller.
    """
    warnings = {}
    for _, row in table.drop_duplicates("controller").iterrows():
        if not row["baseline_limits"]:
            continue
        verdict = (
            "no size is hosted"
            if set(row["baseline_limits"].split("+")) - {"overvoltage"}
            else "a site too small to pull the voltages down is not hosted (see min_peak_mw)"
        )
        warnings[str(row["controller"])] = (
            f"controller {row['controller']}: the feeder without the site already breaks "
            f"{row['baseline_limits']} (at {row['baseline_element']}; violation integral "
            f"{row['baseline_violation_pu_s']:.4g} pu.s): {verdict}"
        )
    return warnings
