"""The core: what a pending write is and how it is judged, with no I/O of its own.

- ``records``, ``fingerprint``, ``sealing``, ``signing``: intents and decisions, the digests of
  history they carry, and how a record is sealed or signed.
- ``classify`` and ``revision``: the two pure rules (fingerprints; a revisioned store's write
  records), each with its verdict table in its docstring.
- ``policy``: what a verdict means under a configuration; ``ownership``: who may act on an intent.
- ``identity``, ``observability``, ``crashpoints``: a store's identity, the decision trail in
  logs and traces, and the named places a test may stop the process.
"""
