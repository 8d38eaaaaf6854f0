"""The installed openai-agents release, for the few tests whose expectations are the SDK's own
and changed between supported releases (each says which, and why)."""

from __future__ import annotations

from importlib import metadata
from typing import Final

import pytest

from agents_reconcile._sdk import release

SDK: Final = release(metadata.version("openai-agents")) or (0, 0, 0)
"""The installed release as ``(major, minor, micro)``."""

SDK_CHUNKS_WRITES: Final = SDK >= (0, 24, 0)
"""Whether the SDK's own ``OpenAIConversationsSession.add_items`` sends a batch in requests of
20 items (from 0.24.0; before, in one request, which the service refuses above 20 items)."""

chunking_sdk = pytest.mark.skipif(
    not SDK_CHUNKS_WRITES,
    reason="the SDK's own Conversations session sends a batch in requests of 20 from 0.24.0",
)
