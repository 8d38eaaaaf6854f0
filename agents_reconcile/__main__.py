"""``python -m agents_reconcile``: the same command line as ``agents-reconcile``."""

from __future__ import annotations

from ._cli import main

raise SystemExit(main())
