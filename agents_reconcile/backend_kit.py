"""Everything a journal or a revisioned store of your own needs, from one public module.

A journal is a core and components (docs/backends.md, "Writing your own journal or store"):

- the core, ``IntentJournal``: intents (``PendingWrite`` in, ``JournalEntry`` and ``Opened``
  out, each held by an ``Owner`` in an ``IntentState``), leases, decisions (``Decision``) and
  write counts, its schema methods (``Unversioned`` for storage that has none), and the
  behaviour flags it may declare (``Capabilities``);
- its components, each an attribute holding an object that meets the protocol, or ``None``:
  ``effects`` (``JournalEffects``: ``Effect`` records in an ``EffectState``), ``aside``
  (``JournalAside``: ``RawIntent`` rows set aside as ``SetAside`` entries), ``pages``
  (``JournalPages``: ``Page`` rows, counted up to ``COUNT_LIMIT``; ``intents_in_memory`` and
  ``effects_in_memory`` page rows a journal holds in memory), ``retention``
  (``JournalRetention``: ``prune`` by a ``Retention``, answering ``Pruned``) and ``sealing``
  (``JournalSealing``);
- its ``keyring`` attribute (a ``Keyring``), which the wrapper fills with its payload keys and
  signer: records are opened and checked with it (``PendingWrite.decode(data, keyring)``,
  ``Effect.decode(data, keyring)``, or the ``checked_*`` readers below);
- reading rows back: ``checked_entry``, ``checked_decision`` and ``checked_effect`` refuse a
  record that fails its checks or sits in another row than its own; ``each`` turns rows into
  records and honours ``collecting_damage`` (an operator's listing that reports a damaged row
  as a ``DamagedRecord`` and goes on, where every other read fails closed).

A revisioned store is an SDK ``Session`` that is also a ``RevisionedStore``: a head revision,
``append_if`` as a compare-and-swap, and a record of writes (``WriteRecord``); ``encode_item``
and ``decode_item`` keep items as the SDK's sessions do.

Check what you wrote with ``agents_reconcile.conformance``. Nothing here is needed to *use* a
journal or a store: that is ``agents_reconcile`` itself.
"""

from __future__ import annotations

from ._backends.aside import RawIntent, SetAside
from ._backends.components import (
    COUNT_LIMIT,
    JournalAside,
    JournalEffects,
    JournalPages,
    JournalRetention,
    JournalSealing,
    Page,
)
from ._backends.journal import Capabilities, IntentJournal, require_limit
from ._backends.pages import effects_in_memory, intents_in_memory
from ._backends.rows import (
    DamagedRecord,
    checked_decision,
    checked_effect,
    checked_entry,
    collecting_damage,
    each,
)
from ._backends.schema import Unversioned
from ._backends.store_items import decode_item, encode_item
from ._core.effect_records import Effect, EffectState
from ._core.ownership import Owner
from ._core.records import (
    ACTIVE_STATES,
    Action,
    BackendIdentity,
    Decision,
    IntentState,
    JournalEntry,
    Opened,
    PendingWrite,
    require_settling,
)
from ._core.retention import Kept, Pruned, Retention
from ._core.revision import RevisionedStore, WriteRecord
from ._core.sealing import Keyring

__all__ = [
    "ACTIVE_STATES",
    "COUNT_LIMIT",
    "Action",
    "BackendIdentity",
    "Capabilities",
    "DamagedRecord",
    "Decision",
    "Effect",
    "EffectState",
    "IntentJournal",
    "IntentState",
    "JournalAside",
    "JournalEffects",
    "JournalEntry",
    "JournalPages",
    "JournalRetention",
    "JournalSealing",
    "Kept",
    "Keyring",
    "Opened",
    "Owner",
    "Page",
    "PendingWrite",
    "Pruned",
    "RawIntent",
    "Retention",
    "RevisionedStore",
    "SetAside",
    "Unversioned",
    "WriteRecord",
    "checked_decision",
    "checked_effect",
    "checked_entry",
    "collecting_damage",
    "decode_item",
    "each",
    "effects_in_memory",
    "encode_item",
    "intents_in_memory",
    "require_limit",
    "require_settling",
]
