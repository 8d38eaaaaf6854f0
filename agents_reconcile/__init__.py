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

# Loaded now, not on first use: ``classify`` is also the name of its module, and the import of
# that module by any other (the session's) would otherwise leave the module under this name.
from .classify import classify

__version__ = "0.1.0"

# A library leaves its log output to the application: without a handler of its own, a record
# that nobody configured logging for would reach ``logging.lastResort`` and stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from . import crashpoints
    from .classify import Observation, Verdict
    from .config import ReconcileConfig
    from .default_runner import UngatedRunWarning, install, installed, uninstall
    from .effects.tool import as_effect_tool, current_effect, effect_tool
    from .errors import (
        BindingMismatch,
        ConfigurationError,
        ContinuationDenied,
        EffectUnknown,
        FingerprintError,
        IntentConflict,
        JournalCorrupt,
        JournalError,
        JournalUnavailable,
        ReconcileError,
        RecordError,
        RecordMalformed,
        RecordTampered,
        RecordUnsigned,
        ResolutionRefused,
        SignatureInvalid,
        UnsupportedRecordVersion,
        UnsupportedSession,
    )
    from .fingerprint import FINGERPRINT_SCHEME, item_digest
    from .journal import IntentJournal, IntentState, JournalEntry, MemoryJournal, SQLiteJournal
    from .policy import Resolution
    from .records import Action, BackendIdentity, Decision, Outcome, PendingWrite, Reason
    from .session import ReconcilingSession
    from .signing import SigningKey

__all__ = [
    "FINGERPRINT_SCHEME",
    "Action",
    "BackendIdentity",
    "BindingMismatch",
    "ConfigurationError",
    "ContinuationDenied",
    "Decision",
    "EffectUnknown",
    "FingerprintError",
    "IntentConflict",
    "IntentJournal",
    "IntentState",
    "JournalCorrupt",
    "JournalEntry",
    "JournalError",
    "JournalUnavailable",
    "MemoryJournal",
    "Observation",
    "Outcome",
    "PendingWrite",
    "Reason",
    "ReconcileConfig",
    "ReconcileError",
    "ReconcilingSession",
    "RecordError",
    "RecordMalformed",
    "RecordTampered",
    "RecordUnsigned",
    "Resolution",
    "ResolutionRefused",
    "SQLiteJournal",
    "SignatureInvalid",
    "SigningKey",
    "UngatedRunWarning",
    "UnsupportedRecordVersion",
    "UnsupportedSession",
    "Verdict",
    "as_effect_tool",
    "classify",
    "crashpoints",
    "current_effect",
    "effect_tool",
    "install",
    "installed",
    "item_digest",
    "uninstall",
]

# Where each public name lives (relative to this package). A name mapped to its own module
# (``crashpoints``) is that module.
_HOMES: Final[dict[str, str]] = {
    "FINGERPRINT_SCHEME": ".fingerprint",
    "Action": ".records",
    "BackendIdentity": ".records",
    "BindingMismatch": ".errors",
    "ConfigurationError": ".errors",
    "ContinuationDenied": ".errors",
    "Decision": ".records",
    "EffectUnknown": ".errors",
    "as_effect_tool": ".effects.tool",
    "current_effect": ".effects.tool",
    "effect_tool": ".effects.tool",
    "FingerprintError": ".errors",
    "IntentConflict": ".errors",
    "IntentJournal": ".journal",
    "IntentState": ".journal",
    "JournalCorrupt": ".errors",
    "JournalEntry": ".journal",
    "JournalError": ".errors",
    "JournalUnavailable": ".errors",
    "MemoryJournal": ".journal",
    "Observation": ".classify",
    "Outcome": ".records",
    "PendingWrite": ".records",
    "Reason": ".records",
    "ReconcileConfig": ".config",
    "ReconcileError": ".errors",
    "ReconcilingSession": ".session",
    "RecordError": ".errors",
    "RecordMalformed": ".errors",
    "RecordTampered": ".errors",
    "RecordUnsigned": ".errors",
    "Resolution": ".policy",
    "ResolutionRefused": ".errors",
    "SQLiteJournal": ".journal",
    "SignatureInvalid": ".errors",
    "SigningKey": ".signing",
    "UngatedRunWarning": ".default_runner",
    "UnsupportedRecordVersion": ".errors",
    "UnsupportedSession": ".errors",
    "Verdict": ".classify",
    "crashpoints": ".crashpoints",
    "install": ".default_runner",
    "installed": ".default_runner",
    "item_digest": ".fingerprint",
    "uninstall": ".default_runner",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home, __name__)
    value = module if home == f".{name}" else getattr(module, name)
    # Kept, so the next lookup is an ordinary attribute read.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
