"""Prove recovery by killing processes: the crash-point matrix behind ``agents-reconcile selftest``.

Each cell runs a real agent (scripted model, a card-charging effect tool) on a real file-backed
session and journal in a child process, kills it with SIGKILL at a named crash point, recovers
in a fresh process, and checks that nothing was duplicated or lost and that nothing went on
from a history nobody could vouch for.
"""

from __future__ import annotations

from .matrix import Cell, Verdict, boundaries, cells, run_cell, run_cells
from .scenario import RecoveryPath
from .stores import STORES, Store

__all__ = [
    "STORES",
    "Cell",
    "RecoveryPath",
    "Store",
    "Verdict",
    "boundaries",
    "cells",
    "run_cell",
    "run_cells",
]
