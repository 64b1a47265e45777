"""Design-space sweeps: which tile chip would beat a given GPU, and by how much.

A sweep runs a task (``simulate``, ``serve``, ``checklist``, ...; ``ipusim.sweep.tasks``) on
every point of a grid or sample over named parameters (``ipusim.sweep.space``), serially or
on Dask (``ipusim.sweep.runner``), into a tidy pandas table streamed to Parquet or CSV
(``ipusim.sweep.output``); ``ipusim.sweep.analysis`` compares the rows with a GPU, finds the
Pareto front and the parameter values where the tile chip draws level.

>>> from ipusim import sweep
>>> res = sweep.run("simulate", vary={"tiles": [736, 1472]}, fixed={"chip": "gc200"})  # doctest: +SKIP
>>> res.table[["tiles", "fit", "time_s"]]  # doctest: +SKIP
"""

from .analysis import against_gpu, break_even, pareto_front
from .output import read_table
from .runner import SweepResult, check_address, local_cluster, run
from .space import grid, grid_size, parse_value, parse_values, parse_vary, point_key, sample
from .tasks import TASKS, register, task

__all__ = [
    "TASKS",
    "SweepResult",
    "against_gpu",
    "break_even",
    "check_address",
    "grid",
    "grid_size",
    "local_cluster",
    "pareto_front",
    "parse_value",
    "parse_values",
    "parse_vary",
    "point_key",
    "read_table",
    "register",
    "run",
    "sample",
    "task",
]
