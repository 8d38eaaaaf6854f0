"""agents-reconcile: no uncertain session write duplicates, loses, or continues unvouched.

Call ``install()`` once, then pass any OpenAI Agents SDK session wrapped in
``ReconcilingSession`` as ``session=`` to the runner.
"""

from __future__ import annotations

from . import crashpoints
from .classify import Observation, Verdict, classify
from .config import ReconcileConfig
from .default_runner import UngatedRunWarning, install, installed, uninstall
from .errors import (
    BindingMismatch,
    ConfigurationError,
    ContinuationDenied,
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
    SignatureInvalid,
    UnsupportedRecordVersion,
    UnsupportedSession,
)
from .fingerprint import FINGERPRINT_SCHEME, item_digest
from .journal import IntentJournal, IntentState, JournalEntry, MemoryJournal, SQLiteJournal
from .records import Action, BackendIdentity, Decision, Outcome, PendingWrite, Reason
from .session import ReconcilingSession
from .signing import SigningKey

__version__ = "0.1.0"

__all__ = [
    "FINGERPRINT_SCHEME",
    "Action",
    "BackendIdentity",
    "BindingMismatch",
    "ConfigurationError",
    "ContinuationDenied",
    "Decision",
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
    "SQLiteJournal",
    "SignatureInvalid",
    "SigningKey",
    "UngatedRunWarning",
    "UnsupportedRecordVersion",
    "UnsupportedSession",
    "Verdict",
    "classify",
    "crashpoints",
    "install",
    "installed",
    "item_digest",
    "uninstall",
]
