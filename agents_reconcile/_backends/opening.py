"""Opening the journal a configuration names (``open_journal``): an ``IntentJournal`` as it is,
else an address, whose engine is the backend registry's answer (``registry``): a path or
``sqlite:`` URL the embedded SQLite file, ``redis://`` and ``postgresql://`` the shared
journals, ``memory:`` one in this process.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from ..errors import ConfigurationError
from .journal import IntentJournal, meant_as_journal, require_journal
from .registry import backend_for, scheme_of
from .sqlite.backend import path_of

__all__ = ["DEFAULT_JOURNAL_PATH", "journal_path", "open_journal"]

DEFAULT_JOURNAL_PATH: Final = "agents-reconcile.db"
"""The embedded journal's file name, in the working directory, when none is configured."""


def open_journal(spec: IntentJournal | str | os.PathLike[str] | None) -> IntentJournal:
    """Resolve a journal address: an ``IntentJournal``, a path, or a URL.

    Paths and ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` URLs open the
    embedded journal; one ``SQLiteJournal`` is shared per file within a process.
    """
    if spec is None:
        _refuse_planted_default(Path(DEFAULT_JOURNAL_PATH))
        spec = DEFAULT_JOURNAL_PATH
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        if isinstance(spec, IntentJournal):
            return spec
        if meant_as_journal(spec):
            require_journal(spec)  # a journal written for an earlier release: says what to add
        raise ConfigurationError(f"journal must be an IntentJournal, a path or a URL, not {spec!r}")
    return backend_for(spec, what="journal").open_journal(spec)


def _refuse_planted_default(path: Path) -> None:
    """The default journal is a file of the working directory, not configured by anyone: a
    symbolic link there, or a file another user owns, may have been planted to read or steer
    the journal. Refused; a journal configured by path is the configurer's to vouch for."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigurationError(f"cannot inspect the default journal {path}: {exc}") from exc
    if stat.S_ISLNK(found.st_mode):
        raise ConfigurationError(
            f"the default journal {path} is a symbolic link; configure the journal's path "
            "explicitly (ReconcileConfig(journal=...)) if that is intended"
        )
    if hasattr(os, "getuid") and found.st_uid != os.getuid():
        raise ConfigurationError(
            f"the default journal {path} belongs to another user (uid {found.st_uid}); "
            "configure the journal's path explicitly (ReconcileConfig(journal=...)) if that "
            "is intended"
        )


def journal_path(spec: object) -> Path | None:
    """The SQLite file a journal address names, or None for other kinds of journal."""
    if spec is None:
        return Path(DEFAULT_JOURNAL_PATH)
    if isinstance(spec, os.PathLike):
        return Path(spec)
    if not isinstance(spec, str) or scheme_of(spec) != "sqlite":
        return None
    return path_of(spec)
