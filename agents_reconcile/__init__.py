"""agents-reconcile: no uncertain session write duplicates, loses, or continues unvouched.

Call ``install()`` once, then pass any OpenAI Agents SDK session wrapped in
``ReconcilingSession`` as ``session=`` to the runner.

The names below are loaded on first use (PEP 562): importing the package alone, or one of its
light modules (``config``, ``records``, ``journal``, ``errors``), does not load the SDK.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Final

__version__ = "0.1.0"

# A library leaves its log output to the application: without a handler of its own, a record
# that nobody configured logging for would reach ``logging.lastResort`` and stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# The public API, each name once, with the module it lives in (relative to this package):
# this table drives both ``__all__`` and loading on first use. The fault-injection helpers
# are in ``agents_reconcile.testing``, the conformance checks in
# ``agents_reconcile.conformance``; every other module is the implementation.
_HOMES: Final[dict[str, str]] = {
    # the session, its configuration, and the gate
    "ReconcilingSession": ".session",
    "ReconcileConfig": ".config",
    "install": ".default_runner",
    "installed": ".default_runner",
    "uninstall": ".default_runner",
    "UngatedRunWarning": ".default_runner",
    "SigningKey": ".signing",
    # tools' external effects
    "effect_tool": ".effects.tool",
    "as_effect_tool": ".effects.tool",
    "current_effect": ".effects.tool",
    # what was decided, and an operator's resolution of it
    "Action": ".records",
    "BackendIdentity": ".records",
    "Decision": ".records",
    "Outcome": ".records",
    "PendingWrite": ".records",
    "Reason": ".records",
    "Resolution": ".policy",
    # journals
    "IntentJournal": ".journal",
    "IntentState": ".journal",
    "JournalEntry": ".journal",
    "MemoryJournal": ".journal",
    "SQLiteJournal": ".journal",
    # the error tree, whole
    "ReconcileError": ".errors",
    "ConfigurationError": ".errors",
    "UnsupportedSession": ".errors",
    "FingerprintError": ".errors",
    "RecordError": ".errors",
    "RecordTampered": ".errors",
    "SignatureInvalid": ".errors",
    "RecordUnsigned": ".errors",
    "PayloadKeyUnknown": ".errors",
    "UnsupportedRecordVersion": ".errors",
    "RecordMalformed": ".errors",
    "RevisionConflict": ".errors",
    "ResolutionRefused": ".errors",
    "SchemaMismatch": ".errors",
    "JournalError": ".errors",
    "JournalUnavailable": ".errors",
    "JournalCorrupt": ".errors",
    "IntentConflict": ".errors",
    "LeaseLost": ".errors",
    "ContinuationDenied": ".errors",
    "BindingMismatch": ".errors",
    "EffectUnknown": ".errors",
}

__all__ = sorted(_HOMES)

if TYPE_CHECKING:
    # For type checkers only (``as`` marks each a re-export); the table above is the list.
    from .config import ReconcileConfig as ReconcileConfig
    from .default_runner import (
        UngatedRunWarning as UngatedRunWarning,
    )
    from .default_runner import (
        install as install,
    )
    from .default_runner import (
        installed as installed,
    )
    from .default_runner import (
        uninstall as uninstall,
    )
    from .effects.tool import (
        as_effect_tool as as_effect_tool,
    )
    from .effects.tool import (
        current_effect as current_effect,
    )
    from .effects.tool import (
        effect_tool as effect_tool,
    )
    from .errors import (
        BindingMismatch as BindingMismatch,
    )
    from .errors import (
        ConfigurationError as ConfigurationError,
    )
    from .errors import (
        ContinuationDenied as ContinuationDenied,
    )
    from .errors import (
        EffectUnknown as EffectUnknown,
    )
    from .errors import (
        FingerprintError as FingerprintError,
    )
    from .errors import (
        IntentConflict as IntentConflict,
    )
    from .errors import (
        JournalCorrupt as JournalCorrupt,
    )
    from .errors import (
        JournalError as JournalError,
    )
    from .errors import (
        JournalUnavailable as JournalUnavailable,
    )
    from .errors import (
        LeaseLost as LeaseLost,
    )
    from .errors import (
        PayloadKeyUnknown as PayloadKeyUnknown,
    )
    from .errors import (
        ReconcileError as ReconcileError,
    )
    from .errors import (
        RecordError as RecordError,
    )
    from .errors import (
        RecordMalformed as RecordMalformed,
    )
    from .errors import (
        RecordTampered as RecordTampered,
    )
    from .errors import (
        RecordUnsigned as RecordUnsigned,
    )
    from .errors import (
        ResolutionRefused as ResolutionRefused,
    )
    from .errors import (
        RevisionConflict as RevisionConflict,
    )
    from .errors import (
        SchemaMismatch as SchemaMismatch,
    )
    from .errors import (
        SignatureInvalid as SignatureInvalid,
    )
    from .errors import (
        UnsupportedRecordVersion as UnsupportedRecordVersion,
    )
    from .errors import (
        UnsupportedSession as UnsupportedSession,
    )
    from .journal import (
        IntentJournal as IntentJournal,
    )
    from .journal import (
        IntentState as IntentState,
    )
    from .journal import (
        JournalEntry as JournalEntry,
    )
    from .journal import (
        MemoryJournal as MemoryJournal,
    )
    from .journal import (
        SQLiteJournal as SQLiteJournal,
    )
    from .policy import Resolution as Resolution
    from .records import (
        Action as Action,
    )
    from .records import (
        BackendIdentity as BackendIdentity,
    )
    from .records import (
        Decision as Decision,
    )
    from .records import (
        Outcome as Outcome,
    )
    from .records import (
        PendingWrite as PendingWrite,
    )
    from .records import (
        Reason as Reason,
    )
    from .session import ReconcilingSession as ReconcilingSession
    from .signing import SigningKey as SigningKey


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    # Kept, so the next lookup is an ordinary attribute read.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
