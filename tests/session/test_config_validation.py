"""The configuration refuses what it cannot mean: each field checked on its own, the on/off
variables read strictly, and a package that is quiet and quick to import."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from agents.memory import SQLiteSession

import agents_reconcile
from agents_reconcile._backends.memory.journal import MemoryJournal
from agents_reconcile._cli import main as cli_main
from agents_reconcile._core.records import BackendIdentity
from agents_reconcile._core.signing import SIGNING_KEY_ENV, SigningKey
from agents_reconcile._session.config import (
    _CHECKS,
    ENV_FLAG,
    ReconcileConfig,
    env_disabled,
    env_switch,
    require_config,
)
from agents_reconcile._session.default_runner import ENV_INSTALL, env_install
from agents_reconcile._session.session import ReconcilingSession
from agents_reconcile.errors import ConfigurationError

KEY = bytes(range(32))
FIELD_NAMES = [f.name for f in fields(ReconcileConfig)]


def refusal(**options: Any) -> str:
    """The message of the ConfigurationError that ``ReconcileConfig(**options)`` raises."""
    with pytest.raises(ConfigurationError) as raised:
        ReconcileConfig(**options)
    return str(raised.value)


def other_fields(message: str, field: str) -> list[str]:
    """The field names, besides ``field``, that ``message`` mentions as words."""
    words = set(message.replace(",", " ").replace(":", " ").split())
    return [name for name in FIELD_NAMES if name != field and name in words]


# -- each field refuses a bad value, in a message of its own -----------------------------------


REFUSED = [
    ("enabled", "no"),
    ("enabled", None),
    ("enabled", 1),
    ("merge_retried_input", "false"),
    ("verify_tail", 0),
    ("install", "yes"),
    ("journal_retries", 2.5),
    ("journal_retries", True),
    ("journal_retries", 0),
    ("journal_retries", "3"),
    ("lease_seconds", "30"),
    ("lease_seconds", 0),
    ("lease_seconds", -1.5),
    ("lease_seconds", True),
    ("lease_seconds", math.nan),
    ("lease_seconds", math.inf),
    ("lease_seconds", None),
    ("in_flight_wait", -0.1),
    ("in_flight_wait", "5"),
    ("in_flight_wait", False),
    ("in_flight_wait", math.inf),
    ("retention", 30),
    ("retention", "30d"),
    ("retention", {"decisions": 30}),
    ("backend_identity", 42),
    ("backend_identity", b"kind|namespace"),
    ("backend_identity", ("kind", "namespace")),
    ("backend_identity", ""),
    ("backend_identity", "|namespace"),
    ("on_unchanged", "maybe"),
    ("on_unchanged", True),
    ("durability", "on_failure"),
    ("durability", "eventually"),
    ("on_extended", "merge"),
    ("journal", 42),
    ("journal", ""),
    ("journal", "   "),
    ("journal", "redis://127.0.0.1:6390/abc"),
    ("journal", "sqlite://relative.db"),
    ("journal", "sqlite:///"),
    ("journal", "postgresql://127.0.0.1:5440"),
]


@pytest.mark.parametrize(("field", "value"), REFUSED)
def test_a_bad_value_is_refused_naming_its_field_and_the_value(field: str, value: Any) -> None:
    """Every field is checked alone: the message starts with the field's name, shows the
    value, and speaks of no other field."""
    message = refusal(**{field: value})
    assert message.startswith(f"{field} "), message
    assert repr(value) in message
    assert other_fields(message, field) == []


def test_a_zero_lease_is_one_message_about_the_lease() -> None:
    message = refusal(lease_seconds=0)
    assert message == "lease_seconds must be a finite number of seconds above 0, not 0"


def test_a_type_error_is_a_configuration_error() -> None:
    """A string where a number belongs is no bare TypeError from a comparison."""
    message = refusal(lease_seconds="30")
    assert "int or float" in message
    assert "str" in message


@pytest.mark.parametrize(
    ("field", "allowed"),
    [
        ("on_unchanged", ("replay", "fail")),
        ("on_extended", ("fail", "append")),
    ],
)
def test_a_choice_lists_the_allowed_values(field: str, allowed: tuple[str, ...]) -> None:
    message = refusal(**{field: "other"})
    for choice in allowed:
        assert repr(choice) in message


def test_the_first_bad_field_is_the_one_named() -> None:
    """Two bad fields: the one declared first is reported, alone."""
    message = refusal(enabled="yes", journal_retries=0)
    assert message.startswith("enabled ")
    assert "journal_retries" not in message


def test_a_journal_url_is_shown_without_its_password() -> None:
    message = refusal(journal="ftp://agent:hunter2@host/journal")
    assert message.startswith("journal ")
    assert "ftp://agent@host/journal" in message
    assert "'ftp'" in message
    assert "hunter2" not in message


def test_a_journal_given_as_bytes_is_named_by_its_type_alone() -> None:
    message = refusal(journal=b"redis://agent:hunter2@127.0.0.1/0")
    assert message.startswith("journal ")
    assert "bytes" in message
    assert "hunter2" not in message


@pytest.mark.parametrize("field", ["payload_key", "signing_key"])
@pytest.mark.parametrize("value", [b"short material", 42, []])
def test_a_bad_key_names_its_field_and_never_the_material(field: str, value: Any) -> None:
    message = refusal(**{field: value})
    assert message.startswith(field), message
    assert "short material" not in message


def test_every_field_but_the_keys_has_a_check() -> None:
    """A field added later without a check of its own fails here."""
    assert [*_CHECKS, "payload_key", "signing_key"] == FIELD_NAMES


# -- valid values stay as they were ----------------------------------------------------------


ACCEPTED = [
    ("enabled", False),
    ("merge_retried_input", False),
    ("verify_tail", True),
    ("install", True),
    ("journal_retries", 1),
    ("journal_retries", 10),
    ("lease_seconds", 1),
    ("lease_seconds", 0.25),
    ("lease_seconds", 10**400),
    ("in_flight_wait", 0),
    ("in_flight_wait", 0.0),
    ("in_flight_wait", 2.5),
    ("backend_identity", None),
    ("backend_identity", "my.Store|tenant-7"),
    ("backend_identity", "my.Store"),
    ("backend_identity", BackendIdentity("my.Store", "tenant-7")),
    ("on_unchanged", "fail"),
    ("durability", "write_ahead"),
    ("on_extended", "append"),
    ("journal", None),
    ("journal", "journal.db"),
    ("journal", "sqlite:///journal.db"),
    ("journal", Path("journal.db")),
    ("journal", "sqlite:////tmp/journal.db"),
    ("journal", "redis://127.0.0.1:6390/0"),
    ("journal", "redis://:pw@127.0.0.1:6390/2"),
    ("journal", "postgresql://agent@127.0.0.1:5440/agents?options=-c%20search_path%3Dx"),
]


@pytest.mark.parametrize(("field", "value"), ACCEPTED)
def test_a_valid_value_is_kept_as_given(field: str, value: Any) -> None:
    config = ReconcileConfig(**{field: value})
    kept = getattr(config, field)
    assert kept == value
    assert type(kept) is type(value)


def test_the_defaults_are_unchanged() -> None:
    config = ReconcileConfig()
    assert (config.enabled, config.journal, config.on_unchanged) == (True, None, "replay")
    assert config.backend_identity is None
    assert (config.merge_retried_input, config.verify_tail, config.install) == (True, False, False)
    assert (config.lease_seconds, config.in_flight_wait, config.journal_retries) == (30.0, 5.0, 3)
    assert config.on_extended == "fail"
    assert config.payload_key is None
    assert config.signing_key is None


def test_a_journal_object_is_kept() -> None:
    journal = MemoryJournal()
    assert ReconcileConfig(journal=journal).journal is journal


def test_keys_are_still_held_as_keys() -> None:
    config = ReconcileConfig(signing_key=KEY, payload_key=[KEY, bytes(reversed(KEY))])
    assert isinstance(config.signing_key, tuple)
    assert [type(key) for key in config.signing_keys] == [SigningKey]
    assert len(config.payload_keys) == 2
    assert KEY.hex() not in repr(config)


def test_replace_builds_a_checked_copy() -> None:
    """dataclasses.replace goes through the same checks, and keeps keys already parsed."""
    config = ReconcileConfig(signing_key=KEY, payload_key=KEY, journal_retries=2)
    copy = dataclasses.replace(config, verify_tail=True)
    assert copy.verify_tail is True
    assert copy.journal_retries == 2
    assert copy.signing_keys == config.signing_keys
    assert [key.key_id for key in copy.payload_keys] == [key.key_id for key in config.payload_keys]
    with pytest.raises(ConfigurationError, match=r"^journal_retries "):
        dataclasses.replace(config, journal_retries=0)
    with pytest.raises(ConfigurationError, match=r"^verify_tail "):
        dataclasses.replace(config, verify_tail="yes")  # type: ignore[arg-type]


# -- require_config --------------------------------------------------------------------------


def test_require_config_fills_in_the_default() -> None:
    assert require_config(None) == ReconcileConfig()


def test_require_config_returns_a_config_as_it_is() -> None:
    config = ReconcileConfig(journal_retries=5)
    assert require_config(config) is config


def test_require_config_refuses_a_mapping_and_says_how_to_build_one() -> None:
    with pytest.raises(ConfigurationError) as raised:
        require_config({"journal_retries": 5})
    message = str(raised.value)
    assert "config must be a ReconcileConfig" in message
    assert "not dict" in message
    assert "ReconcileConfig(**{...})" in message


@pytest.mark.parametrize("value", ["journal.db", 3, ReconcileConfig, [ReconcileConfig()]])
def test_require_config_refuses_anything_else_naming_its_type(value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"not {type(value).__name__}$"):
        require_config(value)


# -- the on/off variables --------------------------------------------------------------------


ON_WORDS = ["1", "true", "on", "yes", "TRUE", "On", " yes ", "\tYES\n"]
OFF_WORDS = ["0", "false", "off", "no", "FALSE", "Off", " no ", "\tNO\n"]
GARBAGE = ["maybe", "2", "-1", "nope", "enabled", "0 1", "y", "n", "disable"]


@pytest.mark.parametrize("word", ON_WORDS)
def test_an_on_word_reads_as_on(word: str) -> None:
    assert env_switch("SWITCH", {"SWITCH": word}) is True


@pytest.mark.parametrize("word", OFF_WORDS)
def test_an_off_word_reads_as_off(word: str) -> None:
    assert env_switch("SWITCH", {"SWITCH": word}) is False


@pytest.mark.parametrize("environ", [{}, {"SWITCH": ""}, {"SWITCH": "  "}])
def test_unset_or_empty_is_not_set(environ: dict[str, str]) -> None:
    assert env_switch("SWITCH", environ) is None


@pytest.mark.parametrize("word", GARBAGE)
def test_any_other_value_is_refused(word: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        env_switch("SWITCH", {"SWITCH": word})
    message = str(raised.value)
    assert message.startswith(f"SWITCH={word!r} ")
    for accepted in ("1", "true", "on", "yes", "0", "false", "off", "no"):
        assert accepted in message


@pytest.mark.parametrize(("word", "off"), [*((w, True) for w in OFF_WORDS), ("1", False)])
def test_the_reconcile_switch(monkeypatch: pytest.MonkeyPatch, word: str, off: bool) -> None:
    monkeypatch.setenv(ENV_FLAG, word)
    assert env_disabled() is off
    assert ReconcileConfig().active is not off


def test_the_reconcile_switch_unset_leaves_the_config_in_charge() -> None:
    assert not env_disabled()
    assert ReconcileConfig().active
    assert not ReconcileConfig(enabled=False).active


@pytest.mark.parametrize("enabled", [True, False])
def test_a_bad_reconcile_switch_is_refused_even_when_disabled(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    monkeypatch.setenv(ENV_FLAG, "disable")
    with pytest.raises(ConfigurationError, match=f"^{ENV_FLAG}='disable' "):
        ReconcileConfig(enabled=enabled).active  # noqa: B018


@pytest.mark.parametrize("enabled", [True, False])
def test_a_bad_reconcile_switch_stops_the_wrapper_being_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, enabled: bool
) -> None:
    monkeypatch.setenv(ENV_FLAG, "of")
    inner = SQLiteSession("s", tmp_path / "s.db")
    with pytest.raises(ConfigurationError, match=ENV_FLAG):
        ReconcilingSession(
            inner, config=ReconcileConfig(journal=tmp_path / "j.db", enabled=enabled)
        )
    assert not (tmp_path / "j.db").exists()


@pytest.mark.parametrize(("word", "on"), [*((w, True) for w in ON_WORDS), ("off", False)])
def test_the_install_switch(monkeypatch: pytest.MonkeyPatch, word: str, on: bool) -> None:
    monkeypatch.setenv(ENV_INSTALL, word)
    assert env_install() is on


def test_the_install_switch_unset_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_INSTALL, raising=False)
    assert env_install() is False


def test_a_bad_install_switch_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_INSTALL, "please")
    with pytest.raises(ConfigurationError, match=f"^{ENV_INSTALL}='please' "):
        env_install()
    inner = SQLiteSession("s", tmp_path / "s.db")
    was_installed = agents_reconcile.installed()
    with pytest.raises(ConfigurationError, match=ENV_INSTALL):
        ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    assert agents_reconcile.installed() is was_installed


# -- the demo checks its settings before it creates anything ---------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        (ENV_FLAG, "maybe"),
        (ENV_INSTALL, "please"),
        (SIGNING_KEY_ENV, "not a key"),
    ],
)
def test_a_bad_setting_stops_the_demo_before_it_creates_its_directory(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    """``AGENTS_RECONCILE=maybe agents-reconcile demo --dir X`` exits 2, naming the variable,
    and X is not there afterwards."""
    monkeypatch.setenv(variable, value)
    directory = tmp_path / "demo"
    assert cli_main(["demo", "--dir", str(directory)]) == 2
    assert variable in capsys.readouterr().err
    assert not directory.exists()


def test_a_bad_setting_stops_the_demo_before_it_makes_a_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv(ENV_FLAG, "maybe")
    assert cli_main(["demo"]) == 2
    assert list(scratch.iterdir()) == []


# -- the package: quiet without logging set up, quick to import --------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter, with neither reconcile switch set."""
    environ = {k: v for k, v in os.environ.items() if k not in (ENV_FLAG, ENV_INSTALL)}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )


def test_the_package_logger_has_a_null_handler() -> None:
    import logging

    handlers = logging.getLogger("agents_reconcile").handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)


def test_a_warning_without_logging_configured_prints_nothing() -> None:
    """Through the package's logger nothing reaches stderr; through another logger the same
    warning does (``logging.lastResort``), so the check can fail."""
    code = (
        "import logging, agents_reconcile\n"
        "logging.getLogger('agents_reconcile._session.default_runner').warning('reconcile-warned')\n"
        "logging.getLogger('agents_reconcile').warning('reconcile-warned')\n"
    )
    quiet = run_python(code)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    loud = run_python("import logging\nlogging.getLogger('elsewhere').warning('other-warned')\n")
    assert "other-warned" in loud.stderr


@pytest.mark.parametrize("name", agents_reconcile.__all__)
def test_every_public_name_imports_from_the_package(name: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"from agents_reconcile import {name}", namespace)
    assert namespace[name] is getattr(agents_reconcile, name)


def test_the_package_lists_its_names_and_refuses_others() -> None:
    assert set(agents_reconcile.__all__) <= set(dir(agents_reconcile))
    assert agents_reconcile.__version__
    with pytest.raises(AttributeError, match="no_such_name"):
        agents_reconcile.no_such_name  # noqa: B018


def test_every_error_a_caller_can_meet_is_exported_from_the_root() -> None:
    from agents_reconcile import errors

    raised = {
        name
        for name in dir(errors)
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), agents_reconcile.ReconcileError)
    }
    assert raised <= set(agents_reconcile.__all__)


def test_the_denials_are_the_sdks_user_errors() -> None:
    from agents.exceptions import UserError

    from agents_reconcile import errors

    assert issubclass(errors.ContinuationDenied, UserError)
    assert issubclass(errors.BindingMismatch, errors.ContinuationDenied)
    assert agents_reconcile.ContinuationDenied is errors.ContinuationDenied
    assert errors.BindingMismatch.__qualname__ == "BindingMismatch"
    assert {"ContinuationDenied", "BindingMismatch"} <= set(dir(errors))


LIGHT_MODULES = [
    "agents_reconcile",
    "agents_reconcile._session.config",
    "agents_reconcile.errors",
    "agents_reconcile._core.records",
    "agents_reconcile._backends.opening",
    "agents_reconcile._backends.redaction",
]


def test_the_light_modules_do_not_load_the_sdk() -> None:
    """The package, its configuration, records and journals import without the SDK (which
    takes seconds); the SDK comes with the session, or with the first denial."""
    code = (
        "import sys\n"
        f"for name in {LIGHT_MODULES!r}:\n"
        "    __import__(name)\n"
        "import agents_reconcile\n"
        "agents_reconcile.__version__, agents_reconcile.ReconcileConfig()\n"
        "print(sorted(m for m in ('agents', 'openai') if m in sys.modules))\n"
        "agents_reconcile.errors.ContinuationDenied\n"
        "print('agents' in sys.modules)\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


# -- a journal written for an earlier release -------------------------------------------------


class _EarlierJournal:
    """A custom journal as written for an earlier release: every method it had then (an
    in-memory journal's, delegated), but neither ``note_again`` nor ``newest_decisions``, and
    no component attributes."""

    _HAD = (
        "record",
        "open_intent",
        "write_count",
        "count_write",
        "transition",
        "discard",
        "pending",
        "get",
        "is_settled",
        "settle",
        "note",
        "decisions",
        "close",
        "schema_version",
        "check",
        "migrate",
    )

    def __init__(self) -> None:
        inner = MemoryJournal()
        for name in self._HAD:
            setattr(self, name, getattr(inner, name))


def test_a_journal_without_the_decision_methods_is_refused_naming_what_to_add() -> None:
    """A custom journal lacking ``note_again`` and ``newest_decisions`` (and the components) is
    refused when configured, with a message that names each and says what to add."""
    message = refusal(journal=_EarlierJournal())
    assert "_EarlierJournal is not an IntentJournal of this release" in message
    assert "note_again(), newest_decisions()" in message
    assert "effects = None, aside = None, pages = None, retention = None, sealing = None" in message


def test_a_journal_complete_but_for_its_components_is_refused_naming_them() -> None:
    """A custom journal with every method but no component attributes is refused, saying to
    declare each as None."""
    journal = _EarlierJournal()
    inner = MemoryJournal()
    journal.note_again = inner.note_again  # type: ignore[attr-defined]
    journal.newest_decisions = inner.newest_decisions  # type: ignore[attr-defined]
    message = refusal(journal=journal)
    assert "it lacks effects, aside, pages, retention, sealing;" in message
    assert "()" not in message.split("lacks", 1)[1].split(";", 1)[0]


class _EarlierEffectJournal(_EarlierJournal):
    """A custom journal of an earlier release that kept tools' effects with methods of its own
    (``begin_effect`` ... ``effects(session_id)``), and every other part of this release."""

    def __init__(self) -> None:
        super().__init__()
        inner = MemoryJournal()
        self.note_again = inner.note_again
        self.newest_decisions = inner.newest_decisions
        for component in ("aside", "pages", "retention", "sealing"):
            setattr(self, component, None)
        self._effects = inner.effects

    async def begin_effect(self, effect: Any) -> Any:
        return await self._effects.begin(effect)

    async def effects(self, session_id: str) -> list[Any]:
        return await self._effects.of_session(session_id)


def test_a_journal_keeping_effects_with_the_methods_of_an_earlier_release_is_refused() -> None:
    """A custom journal whose ``effects`` is the earlier release's method, not a component, is
    refused when configured, naming the component and the methods it takes the place of."""
    message = refusal(journal=_EarlierEffectJournal())
    assert "it lacks effects;" in message
    assert "its effects as an object (a JournalEffects: begin, restart, finish" in message
    assert (
        "begin_effect, restart_effect, finish_effect, effect, effects, started_effects" in message
    )


async def test_a_journal_that_lost_a_method_after_configuring_is_refused_when_first_used(
    tmp_path: Path,
) -> None:
    """A journal that lacks ``newest_decisions`` by the time the wrapper first uses it is
    refused there, with the same message, before anything is written."""
    journal = _EarlierJournal()
    inner = MemoryJournal()
    journal.note_again = inner.note_again  # type: ignore[attr-defined]
    journal.newest_decisions = inner.newest_decisions  # type: ignore[attr-defined]
    for component in ("effects", "aside", "pages", "retention", "sealing"):
        setattr(journal, component, None)
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    del journal.newest_decisions  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match=r"lacks newest_decisions\(\); add the method"):
        await session.add_items([{"role": "user", "content": "hi"}])
    assert await SQLiteSession("s", tmp_path / "chat.db").get_items() == []
    assert await journal.pending(None) == []  # type: ignore[attr-defined]
