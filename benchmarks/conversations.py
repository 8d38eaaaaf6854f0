"""What ``ReconcilingSession`` costs around an ``OpenAIConversationsSession``.

Against the local Conversations server of the tests (``tests/support/conversations_server.py``,
a real HTTP server on loopback), in one run, interleaved (one append of each per round, so that
drift hits both alike):

- a 3-item ``add_items`` (a user message, a function call and its output) on the SDK's own
  session, bare, and on ``ReconcilingSession`` around an identical one;
- the same for a 45-item ``add_items`` (three requests of 20, 20 and 5 both ways);

with p50/p95 latencies, their ratios, and the requests each append made to the server (the
wrapper reads the conversation's tail only when it has no vouched memory of it).

Usage::

    python benchmarks/conversations.py            # 300 rounds
    python benchmarks/conversations.py --quick    # smoke run, a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents_reconcile import ReconcileConfig, ReconcilingSession
from tests.support.conversations_server import ConversationsServer


def batch(round_number: int, size: int) -> list[Any]:
    items: list[Any] = []
    for n in range(size):
        match n % 3:
            case 0:
                items.append({"role": "user", "content": f"question {round_number}.{n}"})
            case 1:
                call = f"call_{round_number}_{n}"
                items.append(
                    {"type": "function_call", "call_id": call, "name": "f", "arguments": "{}"}
                )
            case _:
                call = f"call_{round_number}_{n - 1}"
                items.append({"type": "function_call_output", "call_id": call, "output": "ok"})
    return items


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(rounds: int, size: int, directory: Path) -> None:
    with ConversationsServer() as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="bench", timeout=30.0)
        bare = OpenAIConversationsSession(openai_client=client)
        inner = OpenAIConversationsSession(openai_client=client)
        wrapped = ReconcilingSession(
            inner, config=ReconcileConfig(journal=directory / f"journal-{size}.db")
        )
        await bare.get_items()
        await wrapped.get_items()
        times: dict[str, list[float]] = {"bare": [], "wrapped": []}
        requests: dict[str, int] = {"bare": 0, "wrapped": 0}
        for number in range(rounds):
            for name, session in (("bare", bare), ("wrapped", wrapped)):
                before = len(server.requests)
                started = time.perf_counter()
                await session.add_items(batch(number, size))
                times[name].append(time.perf_counter() - started)
                requests[name] += len(server.requests) - before
        await client.close()
    print(f"{size}-item add_items, {rounds} rounds interleaved:")
    for name in ("bare", "wrapped"):
        values = times[name]
        print(
            f"  {name:8} p50 {statistics.median(values) * 1e3:7.2f} ms  "
            f"p95 {percentile(values, 0.95) * 1e3:7.2f} ms  "
            f"requests per append {requests[name] / rounds:.2f}"
        )
    p50 = statistics.median(times["wrapped"]) / statistics.median(times["bare"])
    p95 = percentile(times["wrapped"], 0.95) / percentile(times["bare"], 0.95)
    print(f"  wrapped/bare: p50 {p50:.2f}x, p95 {p95:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="a smoke run of 20 rounds")
    args = parser.parse_args()
    rounds = 20 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-conversations-") as directory:
        for size in (3, 45):
            asyncio.run(
                measure(rounds if size == 3 else max(5, rounds // 5), size, Path(directory))
            )


if __name__ == "__main__":
    main()
