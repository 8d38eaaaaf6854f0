"""The session: ``ReconcilingSession``'s surface and what one wrapper holds.

An append goes ``session -> writer (or revision_writer) -> journal_client -> inner``; the next
use goes ``gate -> settler -> judges -> policy -> settle / replay / refuse``. ``state`` is the
one per-session object they share; ``claims`` fences every path that writes (worker, settler,
operator, effect, repair); ``resolver`` is an operator's resolution of an intent;
``default_runner`` installs the gate on the SDK's runner.
"""
