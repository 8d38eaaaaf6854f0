"""agents-reconcile: no uncertain session write duplicates, loses, or continues unvouched.

Call ``install()`` once, then pass any OpenAI Agents SDK session wrapped in
``ReconcilingSession`` as ``session=`` to the runner.

The names below are loaded on first use (PEP 562): importing the package alone, or ``errors``,
does not load the SDK, and a journal or store on Redis or PostgreSQL loads its driver only when
named.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Final

from ._sdk import check_sdk

__version__ = "0.1.0"

# Refused at once outside the supported openai-agents releases, naming them.
check_sdk()

# A library leaves its log output to the application: without a handler of its own, a record
# that nobody configured logging for would reach ``logging.lastResort`` and stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# The public API, each name once, with the module it lives in (relative to this package):
# this table drives both ``__all__`` and loading on first use. The fault-injection helpers
# are in ``agents_reconcile.testing``, the conformance checks in
# ``agents_reconcile.conformance``, what a journal or store of one's own needs in
# ``agents_reconcile.backend_kit``; every other module is the implementation.
_HOMES: Final[dict[str, str]] = {
    # the session, its configuration, and the gate
    "ReconcilingSession": "._session.session",
    "ReconcileConfig": "._session.config",
    "install": "._session.default_runner",
    "installed": "._session.default_runner",
    "uninstall": "._session.default_runner",
    "UngatedRunWarning": "._session.default_runner",
    "SigningKey": "._core.signing",
    "PayloadKey": "._core.sealing",
    # tools' external effects
    "effect_tool": "._effects.tool",
    "as_effect_tool": "._effects.tool",
    "current_effect": "._effects.tool",
    "EffectCall": "._effects.tool",
    "NOT_FOUND": "._effects.tool",
    # what was decided, and an operator's resolution of it
    "Action": "._core.records",
    "BackendIdentity": "._core.records",
    "Decision": "._core.records",
    "Outcome": "._core.records",
    "PendingWrite": "._core.records",
    "Reason": "._core.records",
    "Resolution": "._core.policy",
    "Retention": "._core.retention",
    "Pruned": "._core.retention",
    # journals (the Redis and PostgreSQL ones load their drivers, from the extras, on first use)
    "IntentJournal": "._backends.journal",
    "Capabilities": "._backends.journal",
    "IntentState": "._backends.journal",
    "JournalEntry": "._backends.journal",
    "MemoryJournal": "._backends.memory.journal",
    "SQLiteJournal": "._backends.sqlite.journal",
    "RedisJournal": "._backends.redis.journal",
    "RedisClusterJournal": "._backends.redis.journal",
    "PostgresJournal": "._backends.postgres.journal",
    "ReplicaWait": "._backends.redis.replicas",
    # revisioned stores: SDK sessions whose every write is judged exactly
    "RevisionedSQLiteSession": "._backends.sqlite.store",
    "RevisionedRedisSession": "._backends.redis.store",
    "RevisionedPostgresSession": "._backends.postgres.store",
    "MemoryRevisionedSession": "._backends.memory.store",
    # the error tree, whole
    "ReconcileError": ".errors",
    "ConfigurationError": ".errors",
    "UnsupportedSession": ".errors",
    "UnsupportedSDK": ".errors",
    "FingerprintError": ".errors",
    "RecordError": ".errors",
    "RecordTampered": ".errors",
    "SignatureInvalid": ".errors",
    "RecordUnsigned": ".errors",
    "PayloadKeyUnknown": ".errors",
    "UnsupportedRecordVersion": ".errors",
    "RecordMalformed": ".errors",
    "RevisionConflict": ".errors",
    "WriteRefused": ".errors",
    "ResolutionRefused": ".errors",
    "SchemaMismatch": ".errors",
    "JournalError": ".errors",
    "JournalUnavailable": ".errors",
    "JournalCorrupt": ".errors",
    "IntentConflict": ".errors",
    "LeaseLost": ".errors",
    "ContinuationDenied": ".errors",
    "BindingMismatch": ".errors",
    "RunStateExpired": ".errors",
    "RunFinished": ".errors",
    "EffectUnknown": ".errors",
}

__all__ = sorted(_HOMES)

if TYPE_CHECKING:
    # For type checkers only (``as`` marks each a re-export); the table above is the list.
    from ._backends.journal import Capabilities as Capabilities
    from ._backends.journal import IntentJournal as IntentJournal
    from ._backends.journal import IntentState as IntentState
    from ._backends.journal import JournalEntry as JournalEntry
    from ._backends.memory.journal import MemoryJournal as MemoryJournal
    from ._backends.memory.store import MemoryRevisionedSession as MemoryRevisionedSession
    from ._backends.postgres.journal import PostgresJournal as PostgresJournal
    from ._backends.postgres.store import RevisionedPostgresSession as RevisionedPostgresSession
    from ._backends.redis.journal import RedisClusterJournal as RedisClusterJournal
    from ._backends.redis.journal import RedisJournal as RedisJournal
    from ._backends.redis.replicas import ReplicaWait as ReplicaWait
    from ._backends.redis.store import RevisionedRedisSession as RevisionedRedisSession
    from ._backends.sqlite.journal import SQLiteJournal as SQLiteJournal
    from ._backends.sqlite.store import RevisionedSQLiteSession as RevisionedSQLiteSession
    from ._core.policy import Resolution as Resolution
    from ._core.records import Action as Action
    from ._core.records import BackendIdentity as BackendIdentity
    from ._core.records import Decision as Decision
    from ._core.records import Outcome as Outcome
    from ._core.records import PendingWrite as PendingWrite
    from ._core.records import Reason as Reason
    from ._core.retention import Pruned as Pruned
    from ._core.retention import Retention as Retention
    from ._core.sealing import PayloadKey as PayloadKey
    from ._core.signing import SigningKey as SigningKey
    from ._effects.tool import NOT_FOUND as NOT_FOUND
    from ._effects.tool import EffectCall as EffectCall
    from ._effects.tool import as_effect_tool as as_effect_tool
    from ._effects.tool import current_effect as current_effect
    from ._effects.tool import effect_tool as effect_tool
    from ._session.config import ReconcileConfig as ReconcileConfig
    from ._session.default_runner import UngatedRunWarning as UngatedRunWarning
    from ._session.default_runner import install as install
    from ._session.default_runner import installed as installed
    from ._session.default_runner import uninstall as uninstall
    from ._session.session import ReconcilingSession as ReconcilingSession
    from .errors import BindingMismatch as BindingMismatch
    from .errors import ConfigurationError as ConfigurationError
    from .errors import ContinuationDenied as ContinuationDenied
    from .errors import EffectUnknown as EffectUnknown
    from .errors import FingerprintError as FingerprintError
    from .errors import IntentConflict as IntentConflict
    from .errors import JournalCorrupt as JournalCorrupt
    from .errors import JournalError as JournalError
    from .errors import JournalUnavailable as JournalUnavailable
    from .errors import LeaseLost as LeaseLost
    from .errors import PayloadKeyUnknown as PayloadKeyUnknown
    from .errors import ReconcileError as ReconcileError
    from .errors import RecordError as RecordError
    from .errors import RecordMalformed as RecordMalformed
    from .errors import RecordTampered as RecordTampered
    from .errors import RecordUnsigned as RecordUnsigned
    from .errors import ResolutionRefused as ResolutionRefused
    from .errors import RevisionConflict as RevisionConflict
    from .errors import RunFinished as RunFinished
    from .errors import RunStateExpired as RunStateExpired
    from .errors import SchemaMismatch as SchemaMismatch
    from .errors import SignatureInvalid as SignatureInvalid
    from .errors import UnsupportedRecordVersion as UnsupportedRecordVersion
    from .errors import UnsupportedSDK as UnsupportedSDK
    from .errors import UnsupportedSession as UnsupportedSession
    from .errors import WriteRefused as WriteRefused


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
