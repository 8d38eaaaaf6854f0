"""Opening a journal by address for an operator's command: any address the library takes (a
path, ``sqlite:///``, ``redis://``, ``redis+cluster://``, ``postgresql://``), checked before
it is read, so that looking into a journal never creates, migrates or writes it, and a journal
that is not there is said with what is there instead (``diagnosis``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._backends.opening import DEFAULT_JOURNAL_PATH, journal_path
from .._backends.redaction import redacted
from .._backends.registry import backend_for
from .._backends.sqlite.journal import SQLiteJournal
from ..errors import ConfigurationError, JournalError
from .diagnosis import cluster_node, explained, missing_file
from .keys import keyring as deployment_keyring
from .server_reads import redis_refused

if TYPE_CHECKING:
    import argparse

    from .._backends.journal import IntentJournal
    from .._core.sealing import Keyring

__all__ = ["command_journal", "journal_named", "opened_journal"]


async def opened_journal(
    address: str | None,
    *,
    namespace: str | None = None,
    writing: bool = False,
    keyring: Keyring | None = None,
) -> IntentJournal:
    """The journal at ``address`` (the library's default file when None), whose schema is
    this release's. Read-only unless ``writing``; a journal that is not there, or holds
    another schema, is a ``JournalError`` saying so and what is there instead
    (``diagnosis``), and nothing is created. Read-only, an SQLite journal leaves no file
    beside it (``_backends.sqlite.files._reader``)."""
    address = address or DEFAULT_JOURNAL_PATH
    path = journal_path(address)
    journal: IntentJournal
    if path is not None:
        path = path.expanduser().resolve()
        if _missing(path):
            raise JournalError(f"{redacted(address)}: {await missing_file(path)}")
        journal = SQLiteJournal(path, read_only=not writing)
    else:
        backend = backend_for(address, what="journal")
        if backend.journal is None:
            raise ConfigurationError(f"{redacted(address)} is not a journal address")
        journal = backend.open_journal(address, namespace=namespace)
    if keyring is not None:
        from .._session.journal_client import lend_keys

        lend_keys(journal, keyring)
    try:
        problem = await journal.check()
    except JournalError as exc:
        await journal.close()
        # A plain address of one node of a Redis Cluster: the node redirects the read of the
        # schema version to another, which the driver reports only by the slot's number.
        node = await cluster_node(address, "journal", "--namespace") if redis_refused(exc) else None
        if node is not None:
            raise JournalError(f"{redacted(address)}: {node}") from exc
        raise
    except BaseException:
        await journal.close()
        raise
    if problem is not None:
        try:
            problem = await explained(journal, problem, address)
        finally:
            await journal.close()
        raise JournalError(f"{redacted(address)}: {problem}")
    return journal


async def command_journal(args: argparse.Namespace, *, writing: bool = False) -> IntentJournal:
    """The journal a command's options name (``--journal``, ``--namespace``), as
    ``opened_journal`` opens it."""
    # Signed rows are checked, and sealed ones opened, with the deployment's keys when given.
    return await opened_journal(
        args.journal, namespace=args.namespace, writing=writing, keyring=deployment_keyring(args)
    )


def journal_named(args: argparse.Namespace) -> str:
    """The journal a command's options name, as messages print it: its address without a
    password (the default file when none), and its namespace when one is given."""
    where = redacted(args.journal or DEFAULT_JOURNAL_PATH)
    return where + (f" (namespace {args.namespace!r})" if args.namespace else "")


def _missing(path: Path) -> bool:
    """Whether no journal file can be at ``path``: nothing there, or a directory. A path this
    user may not look at is not missing: the journal's check says what stops the look."""
    try:
        return not path.exists() or path.is_dir()
    except OSError:
        return False
