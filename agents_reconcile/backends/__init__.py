"""The backend kit that every journal and store is built from, and the registry of backends.

- ``registry``: each backend, registered by the schemes of its addresses; ``open_journal``,
  ``migrate``, the CLI, the self-test and the test fixtures all find backends there.
- ``schema``: versioned schemas, one model for SQL files and Redis version keys.
- ``redaction``: the one way an address is printed (never with a credential).
- ``connections``: the client or pool a caller passes in first, else one shared per address.
- ``lua``: Lua scripts shipped with the package, run as one command each.
- ``sqlite``, ``postgres``, ``redis``: what a journal and a store on one engine share.
"""
