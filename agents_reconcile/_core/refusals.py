"""Which answers of a store prove that a write was refused outright, and what a decision about
one records. Pure: no I/O.

An answer ends an uncertain write only when it proves two things: that the refused request
stored nothing, and that sending it again would be refused the same way (else the intent is
better left pending, to be judged and sent again once the store takes it). For an OpenAI
conversation, by HTTP status:

=======================  =========================================  =====================
status                   what it says                               the write
=======================  =========================================  =====================
400, 422                 the request is malformed or names what     refused outright
                         does not exist (a deleted ``file_id``)
404, 410                 the conversation (or what an item names)   refused outright
                         is not there
413, 415                 too large, or not a body the service       refused outright
                         reads
401, 403                 these credentials may not write here       pending: nothing was
                                                                    stored, and the same
                                                                    request succeeds once
                                                                    access does
408, 409, 425, 429       timed out, a conflicting request, too      pending: passing (the
                         early, too many requests                   client itself retries
                                                                    them), and a request
                                                                    answered by a proxy
                                                                    may still arrive
5xx, no answer           the service failed, or nobody knows        pending: part of it may
                                                                    have been stored
=======================  =========================================  =====================

The evidence of such a decision names the refused request by the positions of its items in
the batch, and the service's answer by its status, code and the parameter it names (a path
such as ``items[3].content[1].file_id``, kept only when it has that form). The service's
message is never in it: a message may quote an item, and decisions hold no items.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["REFUSED_OUTRIGHT", "refusal_evidence", "refused_item", "refused_outright"]

REFUSED_OUTRIGHT: Final = frozenset({400, 404, 410, 413, 415, 422})
"""The HTTP statuses that prove a write stored nothing and would be refused again."""

_PATH: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\]|\.[A-Za-z_][A-Za-z0-9_]*)*")
_ITEM: Final = re.compile(r"items\[([0-9]+)\]")
_CODE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


def refused_outright(status: int) -> bool:
    """Whether an answer with HTTP ``status`` proves the request stored nothing and would be
    refused again."""
    return status in REFUSED_OUTRIGHT


def refused_item(param: str | None, size: int) -> int | None:
    """The position in its request of the item the service's ``param`` names (``items[N]``
    or a path under it), or None when it names none of the request's ``size`` items."""
    if param is None:
        return None
    found = _ITEM.match(param)
    if found is None:
        return None
    position = int(found.group(1))
    return position if position < size else None


def refusal_evidence(
    *,
    status: int,
    code: str | None,
    param: str | None,
    start: int,
    size: int,
    batch: int,
) -> dict[str, Any]:
    """What a decision about a refused write records: the items that landed (``start``: the
    batch's items before the refused request, which held ``size``), those refused and
    dropped, and the service's answer, payload-free."""
    evidence: dict[str, Any] = {
        "landed": start,
        "refused": [start, start + size],
        "dropped": batch - start,
        "status": status,
    }
    if code is not None and _CODE.fullmatch(code):
        evidence["code"] = code
    if param is not None and _PATH.fullmatch(param):
        evidence["param"] = param
        position = refused_item(param, size)
        if position is not None:
            evidence["item"] = start + position
    return evidence
