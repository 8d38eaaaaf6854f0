"""Journal and store addresses, read as their drivers will read them, and checked whole when
they are given: a part that the driver would misread, ignore, or refuse only at the first
connection is refused here, in a ``ConfigurationError`` naming that part (never a password).

- a plain path or an ``sqlite:`` URL: ``sqlite:///relative.db`` (relative to the working
  directory) or ``sqlite:////absolute/path.db``; the path is what follows ``sqlite://``, so
  ``sqlite://relative.db`` (a path in the host part) and ``sqlite:///`` (no path) are refused;
- ``redis://``, ``rediss://``, ``unix://``: as redis-py's ``from_url`` reads them (the
  database is the path, or ``?db=``; ``unix://`` takes the socket's path), with the database a
  number from 0 and the port one from 1 to 65535;
- ``redis+cluster://``, ``rediss+cluster://``: a Redis Cluster, reached through one or more
  seed nodes (``HOST:PORT`` separated by commas), with no database but 0 and the query settings
  of ``CLUSTER_OPTIONS`` (``cluster_settings`` reads them for the client);
- both Redis forms also take this package's own settings, read here and taken out before the
  driver sees the URL: the replica wait (``REPLICA_WAIT``) and the key prefix (``PREFIX``,
  ``split_prefix``);
- ``postgresql://``, ``postgres://``: as asyncpg reads a libpq-style URL (a host list, ports,
  and parameters in the query), with a database name, in the path or as ``?dbname=``;
- ``memory://NAME``: a journal or store in this process.

Pure: which backend serves a scheme is the registry's word (``registry.check_address`` reads
an address with the check its backend names here, in ``CHECKS``).
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import SplitResult, parse_qs, parse_qsl, quote, unquote, urlsplit, urlunsplit

from ..errors import ConfigurationError
from .redaction import Redacted

__all__ = [
    "CHECKS",
    "CLUSTER_OPTIONS",
    "KNOWN_SCHEMES",
    "PREFIX",
    "REPLICAS_MOST",
    "REPLICA_WAIT",
    "SQLITE_FORMS",
    "WAIT_LONGEST",
    "WAIT_SHORTEST",
    "anything",
    "checked_prefix",
    "chosen_prefix",
    "cluster_settings",
    "printable",
    "replica_wait",
    "single_query",
    "split_prefix",
    "sqlite_file",
    "user_of",
    "with_user",
]

SQLITE_FORMS: Final = (
    "sqlite:///relative.db (relative to the working directory) or sqlite:////absolute/path.db"
)
_PORTS: Final = "a number from 1 to 65535"
_DATABASES: Final = "a database number (0, 1, 2, ...)"
_IPV6: Final = re.compile(r"\[([^\]]+)\](?::(.*))?")
KNOWN_SCHEMES: Final[set[str]] = set()
"""Every scheme a backend serves, filled in by ``registry`` as it registers them (so that
``redis:localhost`` is refused as a URL missing its ``//``, not taken for a file name)."""


def printable(address: str) -> str:
    """``address`` as a message may show it: as written when it holds no secret (``redacted``
    would rebuild it, and an ``sqlite:///`` URL rebuilt loses its ``//``), else redacted."""
    found = Redacted.of(address)
    if found.secrets or found.shown.startswith("<unparsable"):
        return found.shown
    return address


# -- SQLite ------------------------------------------------------------------------------------


def user_of(address: str) -> str | None:
    """The user name a server address connects as (its ``user@``, or a ``?user=`` parameter
    as libpq's URLs take it), unquoted; None where it names none. Never the password."""
    if "://" not in address:
        return None
    try:
        parts = urlsplit(address)
    except ValueError:
        return None
    userinfo, at, _ = parts.netloc.rpartition("@")
    user = unquote(userinfo.partition(":")[0]) if at else ""
    if not user:
        given = parse_qs(parts.query).get("user")
        user = given[-1] if given else ""
    return user or None


def with_user(address: str, user: str | None) -> str:
    """``address`` connecting as ``user``: the name put before its host where it names no user
    there (an address that names one already is left as it is)."""
    if not user or "://" not in address:
        return address
    parts = _split(address)
    if "@" in parts.netloc:
        return address
    netloc = f"{quote(user, safe='')}@{parts.netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def sqlite_file(address: str) -> Path:
    """The file an SQLite address names: a plain path as it is; for an ``sqlite:`` URL, what
    follows ``sqlite://`` with its leading ``/`` taken off (``sqlite:///relative.db``,
    ``sqlite:////absolute/path.db``). Nothing is resolved against the working directory."""
    if "://" not in address:
        _plain_path(address)
        return _file(Path(address), address)
    scheme, rest = address.split("://", 1)
    if scheme.lower() != "sqlite":
        raise ConfigurationError(f"a {scheme}:// URL is no SQLite address")
    if "?" in rest or "#" in rest:
        raise ConfigurationError(
            "an sqlite URL takes no query ('?') or fragment ('#'): they would become part of "
            "the file's name; give the path alone, or as a plain path"
        )
    if rest in ("", "/"):
        raise ConfigurationError(f"the URL names no file: write {SQLITE_FORMS}")
    if not rest.startswith("/"):
        raise ConfigurationError(
            f"the path {rest!r} is in the URL's host part, which sqlite URLs leave empty: "
            f"write sqlite:///{rest} for a file relative to the working directory, or "
            "sqlite:////absolute/path.db"
        )
    return _file(Path(rest[1:]), rest[1:])


def _plain_path(path: str) -> None:
    if path == ":memory:":
        raise ConfigurationError(
            "':memory:' would be a file of that name in the working directory, not a "
            "database in memory: use memory://NAME (or a MemoryJournal) for one in this process"
        )
    head, colon, _ = path.partition(":")
    if colon and head.lower() in KNOWN_SCHEMES:
        raise ConfigurationError(
            f"it would be read as a file path, not as a {head.lower()} URL: write "
            f"{head.lower()}://... (a URL's scheme is followed by '//')"
        )


def _file(path: Path, text: str) -> Path:
    if "\0" in text:
        raise ConfigurationError("the path holds a NUL character")
    try:
        directory = path.expanduser().is_dir()
    except OSError:
        directory = False  # a directory this user cannot search: said when it is opened
    if text.endswith(("/", os.sep)) or directory:
        raise ConfigurationError(f"the path {text!r} names a directory, not a database file")
    return path


# -- Redis -------------------------------------------------------------------------------------

REPLICA_WAIT: Final = ("replicas", "replica_timeout")
"""The query settings of a Redis or Redis Cluster address that ask every write to wait for
replicas (``redis.replicas``): this package's own, taken out before the driver sees the URL."""
REPLICAS_MOST: Final = 100
"""The most replicas a write may wait for (``?replicas=N``): ``WAIT`` takes a count the server
reads as an integer, and a primary with more replicas than this is not a deployment anyone
runs; a larger count is a mistake, refused when the address is read."""
_WAIT_DEFAULT: Final = 1.0
WAIT_SHORTEST: Final = 0.001
WAIT_LONGEST: Final = 3600.0
"""The bounds of the replica wait's time, in seconds (a wait without a limit could hold a
write forever)."""


def replica_wait(query: Mapping[str, str]) -> tuple[int, float] | None:
    """The replica wait a query's settings ask for (``REPLICA_WAIT``; others are ignored):
    how many replicas, and seconds to wait for them (1 unless given); None for none or 0."""
    count_text, timeout_text = query.get("replicas"), query.get("replica_timeout")
    if count_text is None:
        if timeout_text is not None:
            raise ConfigurationError(
                "replica_timeout is given without replicas=N (how many replicas to wait for)"
            )
        return None
    if not (count_text.isascii() and count_text.isdigit()):
        raise ConfigurationError(
            f"replicas={count_text!r} is not a whole number of replicas to wait for"
        )
    if len(count_text.lstrip("0")) > len(str(REPLICAS_MOST)) or int(count_text) > REPLICAS_MOST:
        raise ConfigurationError(
            f"replicas={count_text[:20]!r} is more replicas than a write may wait for (at most "
            f"{REPLICAS_MOST})"
        )
    timeout = _WAIT_DEFAULT
    if timeout_text is not None:
        try:
            timeout = float(timeout_text)
        except ValueError:
            timeout = -1.0
        if not WAIT_SHORTEST <= timeout <= WAIT_LONGEST:
            raise ConfigurationError(
                f"replica_timeout={timeout_text!r} is not a number of seconds from "
                f"{WAIT_SHORTEST:g} to {WAIT_LONGEST:g} (a wait without a limit could hold a "
                "write forever)"
            )
    count = int(count_text)
    return (count, timeout) if count else None


def single_query(
    query: str, *, keep_blank_values: bool = False, strict_parsing: bool = False
) -> dict[str, list[str]]:
    """``query``'s settings as ``parse_qs`` reads them with the same options (each name with
    its one value, in a list), refusing a name given more than once: drivers differ on which
    of two values they take (the first, the last), and this package's own settings took the
    last, so ``?replicas=1&replicas=0`` quietly waited for nothing."""
    found: dict[str, list[str]] = {}
    pairs = parse_qsl(query, keep_blank_values=keep_blank_values, strict_parsing=strict_parsing)
    for name, value in pairs:
        if name in found:
            raise ConfigurationError(
                f"the query parameter {name!r} is given more than once: give it once (which of "
                "its values would count is not one a reader of the address can tell)"
            )
        found[name] = [value]
    return found


PREFIX: Final = "prefix"
"""The query setting of a Redis or Redis Cluster address naming the key prefix that the journal
(or the revisioned store) keeps its keys under, its namespace: what the ``prefix=`` keyword
and the command line's ``--namespace`` name otherwise. This package's own, taken out before
the driver sees the URL (``split_prefix``)."""


def checked_prefix(prefix: object) -> str:
    """``prefix`` when it can be a Redis journal's or store's key prefix; a
    ``ConfigurationError`` saying why not otherwise."""
    if not isinstance(prefix, str) or not prefix:
        raise ConfigurationError("a Redis key prefix must be a non-empty string")
    if "{" in prefix or "}" in prefix:
        raise ConfigurationError(
            f"a Redis key prefix may not hold braces ('{{' or '}}'): {prefix!r}. The first "
            "braces of a key name its hash tag, which the key layout keeps for its own (a "
            "session's keys, and on a Redis Cluster a bucket's, share one slot by it); braces "
            "in the prefix would put every key in one slot"
        )
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"a Redis key prefix must be encodable as UTF-8: {prefix!r}"
        ) from None
    return prefix


def split_prefix(address: str) -> tuple[str, str | None]:
    """``address`` without its ``?prefix=`` (what the driver is given, and what names the
    server), and the prefix it names (None: none), checked (``checked_prefix``)."""
    if "?" not in address:
        return address, None
    parts = _split(address)
    query = single_query(parts.query, keep_blank_values=True)
    given = query.get(PREFIX)
    if given is None:
        return address, None
    kept = "&".join(
        part for part in parts.query.split("&") if unquote(part.split("=", 1)[0]) != PREFIX
    )
    return urlunsplit(parts._replace(query=kept)), checked_prefix(given[0])


def chosen_prefix(in_address: str | None, given: str | None, default: str) -> str:
    """The key prefix of a journal or store whose address names ``in_address`` (its
    ``?prefix=``) and whose caller names ``given`` (the ``prefix=`` keyword, a
    ``--namespace``): either one, the same if both, ``default`` if neither; two that differ are
    refused, since which of them the caller meant cannot be told."""
    if given is not None and in_address is not None and given != in_address:
        raise ConfigurationError(
            f"the key prefix is given twice, as {in_address!r} in the address (?prefix=) and "
            f"as {given!r} (the prefix= keyword, or --namespace): give it once, or the same "
            "in both"
        )
    if in_address is not None:
        return in_address
    return checked_prefix(default if given is None else given)


def _own(query: dict[str, list[str]]) -> dict[str, list[str]]:
    """``query`` with this package's own settings (the replica wait's, the prefix) checked and
    taken out: what is left is the driver's."""
    replica_wait({name: unquote(values[-1]) for name, values in query.items()})
    if PREFIX in query:
        checked_prefix(query[PREFIX][-1])
    return {
        name: values
        for name, values in query.items()
        if name not in REPLICA_WAIT and name != PREFIX
    }


def _redis(address: str) -> None:
    """As redis-py's ``parse_url`` reads the address (its ``asyncio`` one, which the journal
    and the store use), and then refuses what it would accept yet misread or fail on later."""
    parts = _split(address)
    scheme = parts.scheme.lower()
    host_part = parts.netloc.rpartition("@")[2]
    query = _own(single_query(parts.query))
    db_query = query.get("db", [None])[0]
    if db_query is not None:
        _database(unquote(db_query), "db= in the query", "?db=N")
    if scheme == "unix":
        if parts.path in ("", "/"):
            where = f"the socket path {host_part!r} is in the host part: " if host_part else ""
            raise ConfigurationError(
                f"{where}a unix:// URL needs the socket's absolute path: write "
                "unix:///path/to/redis.sock (with ?db=N for a database other than 0)"
            )
    else:
        _port(_host_and_port(host_part)[1])
        path = unquote(parts.path)
        in_path = path[1:] if path.startswith("/") else path
        if in_path:
            _database(in_path, "the URL's path", f"{scheme}://HOST:PORT/N")
            if db_query is not None and int(in_path) != int(unquote(db_query)):
                raise ConfigurationError(
                    f"the database is given twice, as the path ({in_path}) and as "
                    f"db={unquote(db_query)} in the query (which the driver uses): keep one"
                )
    _redis_settings(scheme, query)


def _database(text: str, where: str, form: str) -> None:
    if not (text.isascii() and text.isdigit()):
        raise ConfigurationError(
            f"the database {text!r} ({where}) is not {_DATABASES}: write {form}, or leave it "
            "out for database 0"
        )


def _redis_settings(scheme: str, query: dict[str, list[str]]) -> None:
    """The query's settings, as the installed driver takes them (nothing to check against
    without it: the journal then cannot be opened at all, and says so)."""
    try:
        from redis.asyncio import connection as driver
    except ImportError:
        return
    parsers: Any = getattr(driver, "URL_QUERY_ARGUMENT_PARSERS", {})
    for name, values in query.items():
        parser = parsers.get(name)
        if parser is None or not values:
            continue
        try:
            parser(unquote(values[0]))
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"the query parameter {name!r} has a value the Redis driver cannot read"
            ) from None
    kind = {"unix": "UnixDomainSocketConnection", "rediss": "SSLConnection"}.get(
        scheme, "Connection"
    )
    taken = _keywords(getattr(driver, kind, None))
    if taken is None:
        return
    taken |= {"max_connections"}  # the pool's own
    for name in query:
        if name not in taken:
            raise ConfigurationError(
                f"the query parameter {name!r} is no setting of a {scheme}:// connection: the "
                "driver would refuse it at the first connection"
            )


def _keywords(cls: object) -> set[str] | None:
    """The keyword arguments ``cls()`` takes, or None when it takes any (or cannot tell)."""
    if not isinstance(cls, type):
        return None
    names: set[str] = set()
    passed_on = False
    try:
        for klass in cls.__mro__:
            init = vars(klass).get("__init__")
            if init is None or klass is object:
                continue
            passed_on = False
            for parameter in inspect.signature(init).parameters.values():
                if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                    passed_on = True  # to the next class's, which says what it takes
                elif parameter.kind in (
                    inspect.Parameter.KEYWORD_ONLY,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                ):
                    names.add(parameter.name)
            if not passed_on:
                break
    except (TypeError, ValueError):
        return None
    if passed_on:
        return None  # the last of them takes anything
    names.discard("self")
    return names


# -- Redis Cluster -----------------------------------------------------------------------------


def _flag(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _number(text: str) -> float:
    value = float(text)
    if value < 0 or value != value:  # negative, or not a number
        raise ValueError(text)
    return value


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


CLUSTER_OPTIONS: Final[dict[str, Callable[[str], object]]] = {
    "socket_timeout": _number,
    "socket_connect_timeout": _number,
    "socket_keepalive": _flag,
    "health_check_interval": _number,
    "max_connections": _count,
    "client_name": str,
    "username": str,
    "password": str,
    "protocol": _count,
    "require_full_coverage": _flag,
    "dynamic_startup_nodes": _flag,
    "reinitialize_steps": _count,
}
"""The query settings of a ``redis+cluster://`` address and how each is read: settings of the
driver's cluster client (``RedisCluster``) that mean the same on every node."""
_CLUSTER_TLS_OPTIONS: Final[dict[str, Callable[[str], object]]] = {
    "ssl_cert_reqs": str,
    "ssl_ca_certs": str,
    "ssl_ca_data": str,
    "ssl_certfile": str,
    "ssl_keyfile": str,
    "ssl_check_hostname": _flag,
    "ssl_ciphers": str,
}
_REPLICA_READS: Final = ("read_from_replicas", "load_balancing_strategy")
_CLUSTER_FORM: Final = "redis+cluster://HOST:PORT,HOST:PORT"


def cluster_settings(address: str) -> tuple[list[tuple[str, int]], dict[str, object]]:
    """A ``redis+cluster://`` (or ``rediss+cluster://``) address read whole: its seed nodes
    (host, port; 6379 where none is given) and the client's settings (credentials, TLS, the
    query's settings read as ``CLUSTER_OPTIONS`` says). Refuses what the driver would misread:
    a database other than 0 (a cluster has no other), replica reads (the journal and the store
    read what they wrote, which a replica may not have yet), any other setting."""
    parts = _split(address)
    scheme = parts.scheme.lower()
    secure = scheme == "rediss+cluster"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not hosts:
        raise ConfigurationError(
            f"the URL names no node of the cluster: write {_CLUSTER_FORM} (one or more seed "
            "nodes, separated by commas)"
        )
    seeds = [_seed(spec, hosts) for spec in hosts.split(",")]
    path = unquote(parts.path)
    if path not in ("", "/", "/0"):
        raise ConfigurationError(
            f"the path {path!r} would name a database, and a cluster serves database 0 alone: "
            f"write {_CLUSTER_FORM}"
        )
    settings: dict[str, object] = {"ssl": True} if secure else {}
    if at:
        user, _, password = userinfo.partition(":")
        if user:
            settings["username"] = unquote(user)
        if password:
            settings["password"] = unquote(password)
    readers = {**CLUSTER_OPTIONS, **(_CLUSTER_TLS_OPTIONS if secure else {})}
    for name, values in _own(single_query(parts.query, keep_blank_values=True)).items():
        value = unquote(values[-1])
        if name == "db":
            if value != "0":
                raise ConfigurationError(
                    f"db={value} in the query would name a database, and a cluster serves "
                    "database 0 alone: leave it out"
                )
            continue
        if name in _REPLICA_READS:
            raise ConfigurationError(
                f"the query parameter {name!r} would send reads to replicas, which may lack "
                "what was just written there: a cluster journal or store reads its primaries"
            )
        reader = readers.get(name)
        if reader is None:
            raise ConfigurationError(
                f"the query parameter {name!r} is no setting of a {scheme}:// client: the "
                f"driver would refuse or ignore it (settings: {', '.join(sorted(readers))})"
            )
        try:
            settings[name] = reader(value)
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"the query parameter {name!r} has a value the Redis driver cannot read"
            ) from None
    return seeds, settings


def _seed(spec: str, hosts: str) -> tuple[str, int]:
    if not spec:
        raise ConfigurationError(
            f"the node list {hosts!r} has an empty entry: write {_CLUSTER_FORM}"
        )
    host, port = _host_and_port(unquote(spec))
    if not host:
        raise ConfigurationError(f"the node {spec!r} has no host: write {_CLUSTER_FORM}")
    return host, _port(port) or 6379


def _redis_cluster(address: str) -> None:
    cluster_settings(address)


# -- PostgreSQL ----------------------------------------------------------------------------


def _postgres(address: str) -> None:
    """As asyncpg reads a connection URL: the user information ends at the first ``@``, then a
    comma-separated list of ``host[:port]`` (``[v6]:port``, or a socket directory), the
    database in the path, and the query read strictly."""
    parts = _split(address)
    if parts.netloc.count("@") > 1:
        raise ConfigurationError(
            "there is more than one '@' before the host: write an '@' of the user name or "
            "password as %40"
        )
    try:
        parse_qsl(parts.query, strict_parsing=True) if parts.query else None
    except ValueError:
        raise ConfigurationError(
            "the query holds a field that is not NAME=VALUE (or an empty one, as from '&&')"
        ) from None
    query = single_query(parts.query)
    last = {key: values[-1] for key, values in query.items()}
    if "schema" in last:
        # The driver would send it to the server as a setting, which has none by that name:
        # every statement would then fail as if the journal were damaged.
        raise ConfigurationError(
            "?schema= is not read from a PostgreSQL address (the driver would pass it to the "
            "server as a setting it does not have): give the schema, the journal's or store's "
            "namespace, as schema= (PostgresJournal.from_url, RevisionedPostgresSession) or "
            "with the command line's --namespace / --store-namespace"
        )
    # A bad port is refused even where the host list's own ports make the driver ignore it.
    ports = [_port(text) for text in last["port"].split(",")] if "port" in last else []
    hosts = parts.netloc.rpartition("@")[2]
    if hosts:
        _host_list(hosts, unquoted=True)
    else:
        if "host" in last:
            found = _host_list(last["host"], unquoted=False)
            if len(ports) > 1 and len(ports) != found:
                raise ConfigurationError(
                    f"the query gives {len(ports)} ports for {found} hosts: give one port, or "
                    "one per host"
                )
    database = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if not database and not (last.get("dbname") or last.get("database") or "service" in last):
        raise ConfigurationError(
            "the URL names no database: write postgresql://USER@HOST:PORT/DATABASE "
            "(or add ?dbname=DATABASE)"
        )


def _host_list(hosts: str, *, unquoted: bool) -> int:
    specs = hosts.split(",")
    for spec in specs:
        if not spec:
            raise ConfigurationError(f"the host list {hosts!r} has an empty entry")
        if spec.startswith("/"):
            continue  # a Unix socket directory
        if spec.startswith("["):
            matched = _IPV6.fullmatch(spec)
            if matched is None:
                raise ConfigurationError(
                    f"the host {spec!r} is not an IPv6 address in brackets, with an optional "
                    ":PORT after them"
                )
            port = matched.group(2)
        else:
            port = spec.partition(":")[2] if ":" in spec else None
        if port is not None:
            _port(unquote(port) if unquoted else port)
    return len(specs)


# -- shared --------------------------------------------------------------------------------


def _split(address: str) -> SplitResult:
    try:
        return urlsplit(address)
    except ValueError as exc:
        raise ConfigurationError(
            f"the host part cannot be read ({exc}): an IPv6 address is written in brackets, "
            "as [::1]:PORT"
        ) from None


def _host_and_port(host_part: str) -> tuple[str, str | None]:
    """``host[:port]`` or ``[v6][:port]`` as urllib splits it; None when no port is given
    (an empty one, as in ``host:``, is no port to urllib either)."""
    if host_part.startswith("["):
        matched = _IPV6.fullmatch(host_part)
        if matched is None:
            raise ConfigurationError(
                f"the host {host_part!r} is not an IPv6 address in brackets, with an optional "
                ":PORT after them"
            )
        return matched.group(1), matched.group(2) or None
    host, colon, port = host_part.rpartition(":") if ":" in host_part else (host_part, "", "")
    return host, port if colon and port else None


def _port(text: str | None) -> int:
    if text is None:
        return 0
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise ConfigurationError(f"the port {text!r} is not {_PORTS}")
    return int(text)


def anything(address: str) -> None:
    """Any name will do (``memory://NAME``)."""


CHECKS: Final[dict[str, Callable[[str], object]]] = {
    "sqlite": sqlite_file,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
    "postgres": _postgres,
}
