"""A local fake of the OpenAI Conversations API, for tests of code that keeps history there
(the SDK's ``OpenAIConversationsSession`` among them).

``ConversationsServer`` is a real HTTP/1.1 server on 127.0.0.1 (an ephemeral port, in a daemon
thread). Point ``openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key")`` at it and
the client and the SDK work unchanged. State lives in memory: conversations by id, each an
ordered list of stored items.

Endpoints (under ``/v1``), with the JSON shapes the ``openai`` client parses:

- ``POST /conversations`` (``items``, ``metadata``), ``GET``, ``POST`` (``metadata``) and
  ``DELETE /conversations/{id}``;
- ``POST /conversations/{id}/items`` (1 to 20 ``items``; answers a list of the stored ones),
  ``GET /conversations/{id}/items`` (``order`` asc or desc, default desc; ``limit`` 1 to 100,
  default 20; ``after`` an item id), ``GET`` and ``DELETE /conversations/{id}/items/{item}``
  (the delete answers the conversation).

An unknown conversation or item is a 404, a malformed request a 400, each with an
OpenAI-style error body. Stored items are rewritten as the real service does: a fresh
server-assigned ``id`` (any ``id`` the client sent is replaced), ``type: "message"`` when an
item has a ``role`` and no type, ``status: "completed"`` on messages, function calls and their
outputs when absent, and string ``content`` of a message turned into one content part
(``input_text``, or ``output_text`` with empty ``annotations`` for the assistant). The
optional fields of the client's types that the service writes out whether set or not come back
``null`` when the client left them out (``NULL_WHEN_ABSENT``: an input image's ``file_id`` and
``image_url``, an input file's ``file_id``, ``file_url`` and ``filename``, a reasoning item's
``content`` and ``encrypted_content``), and an input image without a ``detail`` has the
service's default, ``"auto"``. Everything else the client sent is kept.

What the service returns only when asked (``INCLUDABLE``, the values of the items endpoints'
``include`` parameter: an input image's ``image_url``, an output text's ``logprobs``, a
reasoning item's ``encrypted_content``, a computer call output's image URL, and the results,
sources and outputs of the file search, web search and code interpreter calls) is stored, and
given back ``null`` (``logprobs``: an empty list) unless the request's ``include`` names it
(list, retrieve and create all take it; an unknown value is a 400).

Faults (``arm``) fire on the Nth request of a kind, counted from arming: ``reject`` answers an
HTTP error (with the message, code and param given) and changes nothing,
``commit_then_drop`` does the work and closes the connection without a response (a lost
acknowledgement), ``delay`` sleeps before handling. ``extra_fields`` are merged into every item
the server returns, as a newer API version would add fields.

Run ``python -m tests.support.conversations_server --port N`` to serve from a process of its
own: it prints its base URL on one line and serves until SIGTERM or SIGINT, or until
``--max-seconds`` (default 600) have passed. It uses the standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal, NamedTuple, get_args
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "INCLUDABLE",
    "MAX_ITEMS_PER_CREATE",
    "NULL_WHEN_ABSENT",
    "ArmedFault",
    "ConversationsServer",
    "FaultName",
    "RecordedRequest",
    "RequestKind",
    "main",
]

RequestKind = Literal[
    "create_conversation",
    "retrieve_conversation",
    "update_conversation",
    "delete_conversation",
    "create_items",
    "list_items",
    "retrieve_item",
    "delete_item",
]
FaultName = Literal["reject", "commit_then_drop", "delay"]

MAX_ITEMS_PER_CREATE: Final = 20
"""The most items one create request may carry (the real API refuses more)."""

_MAX_LIST_LIMIT: Final = 100
_DEFAULT_LIST_LIMIT: Final = 20
_ID_PREFIXES: Final = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}
_COMPLETED_TYPES: Final = frozenset({"message", "function_call", "function_call_output"})
INCLUDABLE: Final[dict[str, tuple[str, str | None, tuple[str, ...], Any]]] = {
    "message.input_image.image_url": ("message", "input_image", ("image_url",), None),
    "message.output_text.logprobs": ("message", "output_text", ("logprobs",), []),
    "reasoning.encrypted_content": ("reasoning", None, ("encrypted_content",), None),
    "computer_call_output.output.image_url": (
        "computer_call_output",
        None,
        ("output", "image_url"),
        None,
    ),
    "file_search_call.results": ("file_search_call", None, ("results",), None),
    "web_search_call.action.sources": ("web_search_call", None, ("action", "sources"), None),
    "code_interpreter_call.outputs": ("code_interpreter_call", None, ("outputs",), None),
}
"""What the service returns only when the request's ``include`` names it: by ``include``
value, the item type, the content part type of a message (None: the item itself), the path of
the field in it, and what the field holds when it is not asked for (``null``; an output text's
``logprobs`` an empty list)."""
NULL_WHEN_ABSENT: Final[dict[str, tuple[str, ...]]] = {
    "input_image": ("file_id", "image_url"),
    "input_file": ("file_id", "file_url", "filename"),
    "reasoning": ("content", "encrypted_content"),
}
"""By item or content part type: optional fields written out as ``null`` when not given."""
_KINDS: Final[frozenset[str]] = frozenset(get_args(RequestKind))
_FAULTS: Final[frozenset[str]] = frozenset(get_args(FaultName))


class RecordedRequest(NamedTuple):
    """One request the server received, before any fault acted on it."""

    method: str
    path: str
    """The request target as sent, query string included."""
    items: int
    """How many items the request body carried (0 for requests without ``items``)."""


@dataclass
class ArmedFault:
    """A fault that fires on requests ``first`` to ``last`` (inclusive) of ``kind``, numbered
    from the server's start; ``last`` is None for every request from ``first`` on."""

    kind: RequestKind
    fault: FaultName
    first: int
    last: int | None
    status: int = 500
    """The status a ``reject`` answers."""
    seconds: float = 0.0
    """How long a ``delay`` holds the request."""
    retry_after: float | None = None
    """The wait a ``reject`` asks for (``retry-after-ms``), in seconds; None sends none."""
    message: str = "Injected failure."
    """The error message a ``reject`` answers."""
    code: str | None = "injected_fault"
    """The error code a ``reject`` answers."""
    param: str | None = None
    """The parameter a ``reject`` names."""
    holding: str | None = None
    """Fire only on requests whose body holds this text (None: on any)."""
    fired: int = 0
    """How many requests this fault has acted on."""

    def matches(self, kind: str, number: int, raw: bytes) -> bool:
        if kind != self.kind or number < self.first:
            return False
        if self.holding is not None and self.holding.encode() not in raw:
            return False
        return self.last is None or number <= self.last


class _Failure(Exception):
    """An error response: status, message and error code."""

    def __init__(self, status: int, message: str, code: str | None, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


@dataclass
class _Conversation:
    id: str
    created_at: int
    metadata: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": self.created_at,
            "metadata": dict(self.metadata),
        }

    def index_of(self, item_id: str) -> int:
        for index, item in enumerate(self.items):
            if item["id"] == item_id:
                return index
        raise _Failure(
            404, f"No item with id '{item_id}' in conversation '{self.id}'.", "not_found"
        )


class _HTTPServer(ThreadingHTTPServer):
    """The listening server; it keeps its open connections so that ``stop`` can end them."""

    daemon_threads = True

    def __init__(self, fake: ConversationsServer, port: int) -> None:
        self.fake = fake
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout, a closed pool) is no fault of the server.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def end_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle's algorithm holds the body
    # back until the client's delayed acknowledgement (tens of milliseconds a request).
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_GET(self) -> None:
        self.server.fake._serve(self)

    def do_POST(self) -> None:
        self.server.fake._serve(self)

    def do_DELETE(self) -> None:
        self.server.fake._serve(self)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``ConversationsServer.requests`` instead."""

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def drop(self) -> None:
        """Close the connection without writing anything."""
        self.close_connection = True


class ConversationsServer:
    """A fake Conversations API on ``127.0.0.1``, serving from a daemon thread.

    ``start()`` binds an ephemeral port; ``base_url`` is then ``http://127.0.0.1:PORT/v1``.
    Also a context manager (``with ConversationsServer() as server:``).
    """

    def __init__(self, *, extra_fields: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        self._extra_fields: dict[str, Any] = dict(extra_fields or {})
        self._faults: list[ArmedFault] = []
        self._counts: dict[str, int] = dict.fromkeys(_KINDS, 0)
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle

    def start(self, port: int = 0) -> ConversationsServer:
        """Bind ``port`` on 127.0.0.1 (0: an ephemeral one) and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("the server is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(self, port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="conversations-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open connections and wake delayed requests. The state stays
        readable."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.end_connections()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> ConversationsServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # Faults

    def arm(
        self,
        *,
        kind: RequestKind,
        fault: FaultName,
        nth: int = 1,
        times: int | None = 1,
        status: int = 500,
        seconds: float = 0.0,
        retry_after: float | None = None,
        message: str = "Injected failure.",
        code: str | None = "injected_fault",
        param: str | None = None,
        holding: str | None = None,
    ) -> ArmedFault:
        """Fire ``fault`` on the ``nth`` request of ``kind`` counted from now (1 is the next
        one), and on the ``times - 1`` requests of that kind after it (every one from then on
        if ``times`` is None).

        ``reject`` answers ``status`` with an error body of ``message``, ``code`` and
        ``param`` (and ``retry-after-ms`` when ``retry_after`` seconds are given) and changes
        nothing (as the service refuses an item naming a file that no longer exists: ``status``
        400, and ``holding`` the file's id, with ``times`` None); ``commit_then_drop`` does the
        work, then closes the connection without a response; ``delay`` sleeps ``seconds``
        first, then handles the request normally. With ``holding``, only requests whose body
        holds that text are acted on (every request of ``kind`` is still counted). Several
        faults may act on one request: delays first, then the first reject or drop armed.
        """
        if kind not in _KINDS:
            raise ValueError(f"unknown request kind {kind!r}")
        if fault not in _FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        if nth < 1 or (times is not None and times < 1):
            raise ValueError("nth and times count from 1")
        if fault == "reject" and not 400 <= status <= 599:
            raise ValueError("a rejection answers a 4xx or 5xx status")
        with self._lock:
            first = self._counts[kind] + nth
            armed = ArmedFault(
                kind=kind,
                fault=fault,
                first=first,
                last=None if times is None else first + times - 1,
                status=status,
                seconds=seconds,
                retry_after=retry_after,
                message=message,
                code=code,
                param=param,
                holding=holding,
            )
            self._faults.append(armed)
        return armed

    def clear_faults(self) -> None:
        """Disarm every fault."""
        with self._lock:
            self._faults.clear()

    @property
    def extra_fields(self) -> dict[str, Any]:
        """Fields merged over every item the server returns (not stored). A copy."""
        with self._lock:
            return dict(self._extra_fields)

    @extra_fields.setter
    def extra_fields(self, value: dict[str, Any]) -> None:
        with self._lock:
            self._extra_fields = copy.deepcopy(value)

    # Inspection

    def stored(self, conversation_id: str) -> list[dict[str, Any]]:
        """A copy of the conversation's stored items, in order (without ``extra_fields``)."""
        with self._lock:
            conversation = self._conversations.get(conversation_id)
            if conversation is None:
                raise KeyError(conversation_id)
            return copy.deepcopy(conversation.items)

    def conversation_ids(self) -> list[str]:
        """The ids of the conversations that exist, oldest first."""
        with self._lock:
            return list(self._conversations)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def count(self, kind: RequestKind) -> int:
        """How many requests of ``kind`` the server has received."""
        with self._lock:
            return self._counts[kind]

    # Serving

    def _serve(self, handler: _Handler) -> None:
        target = handler.path
        parts = urlsplit(target)
        parsed = parse_qs(parts.query)
        query = {name: values[-1] for name, values in parsed.items()}
        body: Any = None
        raw = handler.read_body()
        try:
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError as error:
                    raise _Failure(400, f"The body is not valid JSON: {error}", None) from None
                if not isinstance(body, dict):
                    raise _Failure(400, "The body must be a JSON object.", None)
            kind, names = self._route(handler.command, parts.path)
            include = _include(parsed)
        except _Failure as failure:
            self._record(handler.command, target, body, None, raw)
            self._fail(handler, failure)
            return

        faults = self._record(handler.command, target, body, kind, raw)
        for fault in faults:
            if fault.fault == "delay" and self._stopping.wait(fault.seconds):
                handler.drop()
                return
        ending = next((fault for fault in faults if fault.fault != "delay"), None)
        if ending is not None and ending.fault == "reject":
            headers = {}
            if ending.retry_after is not None:
                headers["retry-after-ms"] = str(int(ending.retry_after * 1000))
            refusal = _Failure(ending.status, ending.message, ending.code, ending.param)
            self._fail(handler, refusal, headers)
            return

        try:
            status, answer = self._handle(kind, names, query, body or {}, include)
        except _Failure as failure:
            if ending is not None:
                handler.drop()
            else:
                self._fail(handler, failure)
            return
        if ending is not None:
            handler.drop()
            return
        handler.answer(status, answer)

    def _record(
        self, method: str, target: str, body: Any, kind: str | None, raw: bytes
    ) -> list[ArmedFault]:
        """Note the request and return the faults that act on it."""
        items = body.get("items") if isinstance(body, dict) else None
        count = len(items) if isinstance(items, list) else 0
        with self._lock:
            self._requests.append(RecordedRequest(method, target, count))
            if kind is None:
                return []
            self._counts[kind] += 1
            number = self._counts[kind]
            acting = [fault for fault in self._faults if fault.matches(kind, number, raw)]
            for fault in acting:
                fault.fired += 1
            return acting

    def _fail(
        self, handler: _Handler, failure: _Failure, headers: dict[str, str] | None = None
    ) -> None:
        kind = "server_error" if failure.status >= 500 else "invalid_request_error"
        error = {
            "message": failure.message,
            "type": kind,
            "param": failure.param,
            "code": failure.code,
        }
        handler.answer(failure.status, {"error": error}, headers)

    @staticmethod
    def _route(method: str, path: str) -> tuple[str, list[str]]:
        segments = [segment for segment in path.split("/") if segment]
        if segments[:2] == ["v1", "conversations"]:
            names = segments[2:]
            routes: dict[tuple[int, str], str] = {
                (0, "POST"): "create_conversation",
                (1, "GET"): "retrieve_conversation",
                (1, "POST"): "update_conversation",
                (1, "DELETE"): "delete_conversation",
                (2, "POST"): "create_items",
                (2, "GET"): "list_items",
                (3, "GET"): "retrieve_item",
                (3, "DELETE"): "delete_item",
            }
            kind = routes.get((len(names), method))
            if kind is not None and (len(names) < 2 or names[1] == "items"):
                return kind, ([names[0], *names[2:]] if names else [])
        raise _Failure(404, f"No route for {method} {path}.", "unknown_url")

    def _handle(
        self,
        kind: str,
        names: list[str],
        query: dict[str, str],
        body: dict[str, Any],
        include: frozenset[str],
    ) -> tuple[int, Any]:
        with self._lock:
            if kind == "create_conversation":
                return 200, self._create_conversation(body)
            conversation = self._conversation(names[0])
            if kind == "retrieve_conversation":
                return 200, conversation.as_json()
            if kind == "update_conversation":
                conversation.metadata = _metadata(body.get("metadata"))
                return 200, conversation.as_json()
            if kind == "delete_conversation":
                del self._conversations[conversation.id]
                return 200, {
                    "id": conversation.id,
                    "object": "conversation.deleted",
                    "deleted": True,
                }
            if kind == "create_items":
                if "items" not in body:
                    raise _Failure(400, "Missing required parameter: 'items'.", None, "items")
                stored = _rewrite_all(body["items"], allow_empty=False)
                conversation.items.extend(stored)
                return 200, self._page(stored, has_more=False, include=include)
            if kind == "list_items":
                return 200, self._list(conversation, query, include)
            index = conversation.index_of(names[1])
            if kind == "retrieve_item":
                return 200, self._render(conversation.items[index], include)
            del conversation.items[index]
            return 200, conversation.as_json()

    def _conversation(self, conversation_id: str) -> _Conversation:
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            raise _Failure(404, f"Conversation with id '{conversation_id}' not found.", "not_found")
        return conversation

    def _create_conversation(self, body: dict[str, Any]) -> dict[str, Any]:
        conversation = _Conversation(
            id=f"conv_{uuid.uuid4().hex}",
            created_at=int(time.time()),
            metadata=_metadata(body.get("metadata")),
        )
        items = body.get("items")
        if items is not None:
            # Validated before the conversation exists, so a refused request creates nothing.
            rewritten = _rewrite_all(items, allow_empty=True)
            conversation.items.extend(rewritten)
        self._conversations[conversation.id] = conversation
        return conversation.as_json()

    def _list(
        self, conversation: _Conversation, query: dict[str, str], include: frozenset[str]
    ) -> dict[str, Any]:
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise _Failure(400, f"Invalid 'order': {order!r}.", "invalid_value", "order")
        try:
            limit = int(query.get("limit", _DEFAULT_LIST_LIMIT))
        except ValueError:
            raise _Failure(400, "Invalid 'limit'.", "invalid_value", "limit") from None
        if not 1 <= limit <= _MAX_LIST_LIMIT:
            raise _Failure(
                400,
                f"Invalid 'limit': {limit}; it must be between 1 and {_MAX_LIST_LIMIT}.",
                "invalid_value",
                "limit",
            )
        view = conversation.items if order == "asc" else conversation.items[::-1]
        start = 0
        after = query.get("after")
        if after is not None:
            positions = [index for index, item in enumerate(view) if item["id"] == after]
            if not positions:
                raise _Failure(
                    404,
                    f"No item with id '{after}' in conversation '{conversation.id}'.",
                    "not_found",
                    "after",
                )
            start = positions[0] + 1
        page = view[start : start + limit]
        return self._page(page, has_more=start + limit < len(view), include=include)

    def _page(
        self, items: list[dict[str, Any]], *, has_more: bool, include: frozenset[str]
    ) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [self._render(item, include) for item in items],
            "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None,
            "has_more": has_more,
        }

    def _render(self, item: dict[str, Any], include: frozenset[str]) -> dict[str, Any]:
        """An item as the server returns it: a copy, what the request did not ``include``
        given back ``null``, with ``extra_fields`` merged over it."""
        rendered = copy.deepcopy(item)
        for name, (item_type, part_type, path, withheld) in INCLUDABLE.items():
            if name in include or rendered.get("type") != item_type:
                continue
            if part_type is None:
                _withhold(rendered, path, withheld)
                continue
            content = rendered.get("content")
            for part in content if isinstance(content, list) else ():
                if isinstance(part, dict) and part.get("type") == part_type:
                    _withhold(part, path, withheld)
        rendered.update(copy.deepcopy(self._extra_fields))
        return rendered


def _withhold(container: dict[str, Any], path: tuple[str, ...], withheld: Any) -> None:
    """Write the field at ``path`` as ``withheld`` (where its parent exists)."""
    for step in path[:-1]:
        inner = container.get(step)
        if not isinstance(inner, dict):
            return
        container = inner
    container[path[-1]] = copy.deepcopy(withheld)


def _include(query: dict[str, list[str]]) -> frozenset[str]:
    """The ``include`` values of a query (``include[]=`` as the ``openai`` client writes
    them, or ``include=``), or a 400 for one the service does not know."""
    values = [*query.get("include[]", ()), *query.get("include", ())]
    for value in values:
        if value not in INCLUDABLE:
            raise _Failure(400, f"Invalid 'include': {value!r}.", "invalid_value", "include")
    return frozenset(values)


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Failure(400, "Invalid 'metadata': expected an object.", "invalid_type", "metadata")
    return dict(value)


def _rewrite_all(items: Any, *, allow_empty: bool) -> list[dict[str, Any]]:
    """The items as the server stores them, or a 400 for a malformed list (nothing stored)."""
    if not isinstance(items, list):
        raise _Failure(400, "Invalid 'items': expected an array.", "invalid_type", "items")
    if not items and not allow_empty:
        raise _Failure(400, "Invalid 'items': expected at least 1 item.", "empty_array", "items")
    if len(items) > MAX_ITEMS_PER_CREATE:
        raise _Failure(
            400,
            f"Invalid 'items': array too long. Expected an array with maximum length "
            f"{MAX_ITEMS_PER_CREATE}, but got an array with length {len(items)} instead.",
            "array_above_max_length",
            "items",
        )
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Failure(
                400, f"Invalid 'items[{index}]': expected an object.", "invalid_type", "items"
            )
    return [_rewrite(item) for item in items]


def _rewrite(sent: dict[str, Any]) -> dict[str, Any]:
    item = copy.deepcopy(sent)
    if "role" in item and "type" not in item:
        item["type"] = "message"
    item_type = item.get("type")
    prefix = _ID_PREFIXES.get(item_type, "item") if isinstance(item_type, str) else "item"
    item["id"] = f"{prefix}_{uuid.uuid4().hex}"
    if item_type in _COMPLETED_TYPES:
        item.setdefault("status", "completed")
    if item_type == "message":
        assistant = item.get("role") == "assistant"
        content = item.get("content")
        if isinstance(content, str):
            if assistant:
                item["content"] = [{"type": "output_text", "text": content, "annotations": []}]
            else:
                item["content"] = [{"type": "input_text", "text": content}]
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    _part_defaults(part)
    for name in NULL_WHEN_ABSENT.get(item_type, ()) if isinstance(item_type, str) else ():
        item.setdefault(name, None)
    return item


def _part_defaults(part: dict[str, Any]) -> None:
    """What the service writes into a content part the client left out."""
    part_type = part.get("type")
    if part_type == "output_text":
        part.setdefault("annotations", [])
    elif part_type == "input_image":
        part.setdefault("detail", "auto")
    for name in NULL_WHEN_ABSENT.get(part_type, ()) if isinstance(part_type, str) else ():
        part.setdefault(name, None)


def main(argv: list[str] | None = None) -> int:
    """Serve in the foreground: print the base URL, then serve until SIGTERM or SIGINT, or
    until ``--max-seconds`` have passed."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.conversations_server",
        description="Serve a fake OpenAI Conversations API on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: any free port)")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="stop by itself after this many seconds (default 600)",
    )
    args = parser.parse_args(argv)
    if args.max_seconds <= 0:
        parser.error("--max-seconds must be positive")

    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    server = ConversationsServer()
    server.start(port=args.port)
    try:
        print(server.base_url, flush=True)
        done.wait(args.max_seconds)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
