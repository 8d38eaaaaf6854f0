"""A RunState that went through a client is untrusted input.

Whoever holds ``RunState.to_string()`` can edit it. What such a client can do is bounded here:
a forged or edited copy never reaches the journal (so it never holds other runs back), a signed
deployment refuses what its key does not vouch for, and a used approval checkpoint is refused
from evidence the client cannot edit, whatever its context says.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, SQLiteSession
from agents.testing import assistant_message

from agents_reconcile import (
    BindingMismatch,
    ConfigurationError,
    ContinuationDenied,
    PendingWrite,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
)
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._cli import main
from agents_reconcile._core.fingerprint import digest_items, journal_batch
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.signing import SIGNING_KEY_ENV, Signer, SigningKey, signer_for
from agents_reconcile._session.runstate import CONTEXT_KEY, MAX_CARRIED, put
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKENDS, closed_port
from ..support.runner_support import FIRST_RUN, World, first_run_steps, resume_state, run
from .test_approval_composition import interrupted_run

KEY = os.urandom(32)
COMPLETE = ["user:hi", "call:c1", "output:c1", "assistant:done"]


def keyed(signed: bool) -> dict[str, Any]:
    return {"signing_key": KEY} if signed else {}


def forged_intent(session: ReconcilingSession, n: int = 0) -> PendingWrite:
    """A well-formed intent of this session that no run ever made: its items claim to follow
    a history the store never held."""
    batch, digests = journal_batch([{"role": "user", "content": f"forged {n}"}])
    return PendingWrite(
        intent_id=f"forged{n:026d}",
        session_id=session.session_id,
        backend=session.backend_identity,
        batch=batch,
        batch_digests=digests,
        before_digests=("0" * 64,),
        before_is_whole=False,
        created_at=time.time(),
    )


def forged_context(
    session: ReconcilingSession, count: int = 1, signer: Signer | None = None
) -> dict[str, Any]:
    context: dict[str, Any] = {}
    for n in range(count):
        put(context, forged_intent(session, n), signer)
    return context


async def journal_pending(world: World) -> list[Any]:
    journal = SQLiteJournal(world.directory / "journal.db", read_only=True)
    try:
        return await journal.pending(world.session_id)
    finally:
        await journal.close()


async def answer(world: World, session: ReconcilingSession, context: Any) -> Any:
    agent, _ = world.agent([[assistant_message("ok")]])
    return await Runner.run(
        agent, "next", session=session, run_config=session.run_config(), context=context
    )


# -- forged copies ------------------------------------------------------------------------------


async def test_without_a_key_a_forged_copy_denies_its_own_run_only(tmp_path: Path) -> None:
    """No signing key: the forged intent is judged for the run that carries it (ambiguous, so
    denied), never written to the journal; the real user's fresh run goes on."""
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start()
        with pytest.raises(ContinuationDenied) as denied:
            await answer(world, session, forged_context(session))
        assert denied.value.decision.reason is Reason.HISTORY_CHANGED
        assert denied.value.decision.evidence["source"] == "run_state_only"
        assert await journal_pending(world) == []
        await answer(world, await world.restart(), {})
        assert await world.history() == ["user:next", "assistant:ok"]
    finally:
        await world.close()


@pytest.mark.parametrize("forgery", ["unsigned", "other_key", "edited_after_signing"])
async def test_with_a_key_a_forged_copy_is_refused_and_nothing_is_journaled(
    tmp_path: Path, forgery: str
) -> None:
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(signing_key=KEY)
        if forgery == "unsigned":
            context = forged_context(session)
        elif forgery == "other_key":
            context = forged_context(session, signer=Signer([SigningKey(os.urandom(32))]))
        else:
            context = forged_context(session, signer=Signer([SigningKey(KEY)]))
            entry = context[CONTEXT_KEY]["pending"][0]
            entry["before_digests"] = ["1" * 64]  # then the digest recomputed, as a forger would
            entry["digest"] = "f" * 64
        with pytest.raises(BindingMismatch) as refused:
            await answer(world, session, context)
        assert refused.value.decision.reason is Reason.STATE_UNSIGNED
        assert await journal_pending(world) == []
        assert await world.history() == []
        await answer(world, await world.restart(), {})
        assert await world.history() == ["user:next", "assistant:ok"]
    finally:
        await world.close()


@pytest.mark.parametrize("signed", [False, True], ids=["no_key", "key"])
async def test_thousands_of_forged_entries_are_refused_at_once(
    tmp_path: Path, signed: bool
) -> None:
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(**keyed(signed))
        context = forged_context(session, 3000)
        started = time.monotonic()
        with pytest.raises(BindingMismatch) as refused:
            await answer(world, session, context)
        assert time.monotonic() - started < 2.0
        assert refused.value.decision.reason is Reason.STATE_TOO_LARGE
        assert refused.value.decision.evidence == {"entries": 3000, "limit": MAX_CARRIED}
        assert await journal_pending(world) == []
        await answer(world, await world.restart(), {})
    finally:
        await world.close()


# -- genuine copies still work --------------------------------------------------------------------


@pytest.mark.parametrize("signed", [False, True], ids=["no_key", "key"])
async def test_a_genuine_copy_resumed_against_another_journal_replays_once(
    tmp_path: Path, signed: bool
) -> None:
    """The copy a failed run carried, resumed where the journal never saw it: replayed once
    (signed, it is adopted into the journal; unsigned, judged for this run, then recorded
    only to replay it)."""
    world = World(BACKENDS[0], tmp_path)
    try:
        await world.start(**keyed(signed))
        assert world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=2)
        agent, _ = world.agent(first_run_steps())
        with pytest.raises(BackendFailure) as raised:
            await run(agent, "hi", world.session, streamed=True, context={})  # type: ignore[arg-type]
        text = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
        carried = json.loads(text)["context"]["context"][CONTEXT_KEY]
        assert ("signature" in carried["pending"][0]) is signed
        assert ("signatures" in carried) is signed

        session = await world.restart(journal=tmp_path / "other-journal.db")
        agent, _ = world.agent(first_run_steps()[1:])
        await run(agent, await resume_state(agent, text), session, streamed=False)
        assert await world.history() == FIRST_RUN
        assert world.charges == [5]
        assert [d.action.value for d in await session.decisions()] == ["replayed"]
        assert await session.pending() == []
    finally:
        await world.close()


async def test_the_context_names_no_file_or_host(tmp_path: Path) -> None:
    """What a client sees of the deployment: session ids and opaque digests, no paths."""
    world = World(BACKENDS[0], tmp_path)
    try:
        await world.start()
        assert world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=2)
        agent, _ = world.agent(first_run_steps())
        context: dict[str, Any] = {}
        with pytest.raises(BackendFailure):
            await run(agent, "hi", world.session, streamed=False, context=context)  # type: ignore[arg-type]
        shown = json.dumps(context)
        assert CONTEXT_KEY in context and context[CONTEXT_KEY]["pending"]
        assert str(tmp_path) not in shown and "sessions.db" not in shown
        seen = context[CONTEXT_KEY]["seen_write_counts"]
        assert all(key.startswith("user-42@opaque|") for key in seen)
    finally:
        await world.close()


# -- marks and used checkpoints -------------------------------------------------------------------


async def test_with_a_key_an_edited_mark_is_refused(tmp_path: Path) -> None:
    """An approval checkpoint resumed for the first time, its mark edited on the way: refused
    before its tool runs, for the mark does not verify."""
    world = World(BACKENDS[0], tmp_path)
    try:
        agent, _, text = await interrupted_run(world, signing_key=KEY)
        session = await world.restart()
        state = await resume_state(agent, text)
        edit_context(state, "raised")
        with pytest.raises(BindingMismatch) as refused:
            await Runner.run(
                agent,
                state,
                session=session,
                run_config=session.run_config(),
                hooks=session.hooks(),
            )
        assert refused.value.decision.reason is Reason.STATE_UNSIGNED
        assert world.charges == []
        assert await journal_pending(world) == []
    finally:
        await world.close()


def edit_context(state: Any, how: str) -> None:
    context = state._context.context
    if how == "removed":
        del context[CONTEXT_KEY]
    else:
        marks = context[CONTEXT_KEY]["seen_write_counts"]
        for key in marks:
            marks[key] += 1000


@pytest.mark.parametrize("signed", [False, True], ids=["no_key", "key"])
@pytest.mark.parametrize("how", ["removed", "raised"])
async def test_a_used_checkpoint_with_an_edited_context_is_refused_before_its_tool_runs(
    tmp_path: Path, signed: bool, how: str
) -> None:
    """Resumed once to the end, the approval checkpoint comes back with its context removed or
    its mark raised: the stored output of the approved call gives it away (or, signed, the mark
    does not verify), and the tool does not run again."""
    world = World(BACKENDS[0], tmp_path)
    try:
        agent, _, text = await interrupted_run(world, **keyed(signed))
        session = await world.restart()
        state = await resume_state(agent, text)
        await Runner.run(
            agent, state, session=session, run_config=session.run_config(), hooks=session.hooks()
        )
        assert await world.history() == COMPLETE and world.charges == [5]

        again = await world.restart()
        state = await resume_state(agent, text)
        edit_context(state, how)
        with pytest.raises(ContinuationDenied) as denied:
            await Runner.run(
                agent, state, session=again, run_config=again.run_config(), hooks=again.hooks()
            )
        expected = Reason.STATE_UNSIGNED if signed and how == "raised" else Reason.STALE_STATE
        assert denied.value.decision.reason is expected
        assert world.charges == [5]
        assert await world.history() == COMPLETE
    finally:
        await world.close()


# -- keys -----------------------------------------------------------------------------------------


def test_the_environment_gives_keys_only_when_the_configuration_names_none() -> None:
    configured = SigningKey(KEY)
    other = SigningKey(os.urandom(32))

    text = base64.b64encode(os.urandom(32)).decode()
    assert signer_for((configured,), {SIGNING_KEY_ENV: text}).current == configured  # type: ignore[union-attr]
    from_env = signer_for(
        (), {SIGNING_KEY_ENV: f"{text}, {base64.b64encode(os.urandom(32)).decode()}"}
    )
    assert from_env is not None and from_env.current == SigningKey(text)
    assert signer_for((), {}) is None
    assert repr(other) == f"SigningKey(key_id={other.key_id!r})"


@pytest.mark.parametrize("value", ["", " , ", "not base64!", "c2hvcnQ="])
def test_a_bad_key_in_the_environment_is_refused_not_ignored(value: str) -> None:

    with pytest.raises(ConfigurationError, match=SIGNING_KEY_ENV):
        signer_for((), {SIGNING_KEY_ENV: value})


def test_a_configured_key_never_shows_its_material() -> None:
    config = ReconcileConfig(signing_key=[KEY, os.urandom(32)])
    shown = repr(config)
    assert KEY.hex() not in shown and repr(KEY) not in shown
    assert "SigningKey(key_id=" in shown


# -- secrets --------------------------------------------------------------------------------------

SECRET = "pw-not-to-be-shown"
URL_FORMS = [
    "postgresql://agent:{secret}@127.0.0.1:{port}/db",
    "postgresql://agent@127.0.0.1:{port}/db?password={secret}",
    "postgresql://agent@127.0.0.1:{port}/db?sslmode=disable&sslpassword={secret}",
    "redis://:{secret}@127.0.0.1:{port}/0",
    "redis://agent:{secret}@127.0.0.1:{port}/0",
    "redis://127.0.0.1:{port}/0?password={secret}",
]


@pytest.mark.parametrize("form", URL_FORMS)
def test_no_password_of_any_url_form_is_printed_by_the_config_or_the_cli(
    form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the configuration's repr and the CLI's output (``migrate --check``, ``pending``):
    the server is named, never its password."""
    url = form.format(secret=SECRET, port=closed_port())
    config = ReconcileConfig(journal=url)
    assert SECRET not in repr(config) and "127.0.0.1" in repr(config)
    main(["migrate", "--check", "--journal", url])
    main(["pending", "--journal", url])
    shown = capsys.readouterr()
    assert SECRET not in shown.out + shown.err and "127.0.0.1" in shown.err


@pytest.mark.parametrize("form", URL_FORMS)
async def test_no_password_of_any_url_form_reaches_errors_or_logs(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:

    url = form.format(secret=SECRET, port=closed_port())
    config = ReconcileConfig(journal=url, journal_retries=1)
    session = ReconcilingSession(SQLiteSession("s"), config=config)
    with pytest.raises(Exception) as raised:
        await session.add_items([{"role": "user", "content": "x"}])
    shown = [str(raised.value), repr(raised.value), *getattr(raised.value, "__notes__", [])]
    assert "127.0.0.1" in "\n".join(shown)
    assert SECRET not in "\n".join(shown)
    assert SECRET not in caplog.text


# -- journal rows ---------------------------------------------------------------------------------


async def test_with_a_key_journal_rows_are_signed_and_an_injected_one_is_refused(
    tmp_path: Path,
) -> None:
    """Whoever can write the journal but lacks the key cannot get a batch replayed: the row
    it injects carries no valid MAC, and the session is denied rather than written."""
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(signing_key=KEY)
        await session.add_items([{"role": "user", "content": "real"}])
        intruder = SQLiteJournal(world.directory / "journal.db")
        forged = forged_intent(session)
        # Built to be replayed: its "history before" is exactly what the store holds.
        before = digest_items([{"role": "user", "content": "real"}])
        forged = PendingWrite(
            **{**forged.__dict__, "before_digests": before, "before_is_whole": True}
        )
        await intruder.record(forged, state=IntentState.FAILED, owner=current_owner())
        await intruder.close()
        with pytest.raises(ContinuationDenied) as denied:
            await (await world.restart()).get_items()
        assert denied.value.decision.reason is Reason.RECORD_UNTRUSTED
        assert "signature" in str(denied.value.decision.evidence)
        assert await world.history() == ["user:real"]
    finally:
        await world.close()


async def test_with_a_key_a_failed_write_is_recorded_signed_and_settled(tmp_path: Path) -> None:
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(signing_key=KEY)
        assert world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=1)
        with pytest.raises(BackendFailure):
            await session.add_items([{"role": "user", "content": "one"}])

        with sqlite3.connect(world.directory / "journal.db") as conn:
            (record,) = conn.execute("SELECT record FROM unresolved").fetchone()
        assert json.loads(record)["mac"]["kid"] == SigningKey(KEY).key_id
        again = await world.restart()
        assert await again.get_items() == [{"role": "user", "content": "one"}]
        assert [d.action.value for d in await again.decisions()] == ["replayed"]
    finally:
        await world.close()


async def test_a_symbolic_link_planted_as_the_default_journal_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default journal is a file of the working directory nobody configured: a link there
    (to a file another user reads, say) is refused, not followed; a configured path is not."""
    elsewhere = tmp_path / "elsewhere.db"
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "agents-reconcile.db").symlink_to(elsewhere)
    monkeypatch.chdir(workdir)
    session = ReconcilingSession(SQLiteSession("s", str(tmp_path / "chat.db")))
    with pytest.raises(ConfigurationError, match="symbolic link"):
        await session.add_items([{"role": "user", "content": "x"}])
    assert not elsewhere.exists()
    configured = ReconcilingSession(
        SQLiteSession("s", str(tmp_path / "chat.db")),
        config=ReconcileConfig(journal=workdir / "agents-reconcile.db"),
    )
    await configured.add_items([{"role": "user", "content": "x"}])
    assert elsewhere.exists()
    await configured.journal.close()
