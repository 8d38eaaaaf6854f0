"""The Agents SDK's own session tests, run with and without ``ReconcilingSession``.

``python -m compat.sdk_tests`` fetches the SDK's source distribution, builds a virtual
environment for it and runs its session-related tests twice: as they are, and with every
session the runner is given wrapped (the pytest plugin ``compat.wrap_sessions``). A test that
passes as it is must pass wrapped, unless ``compat/reviewed.toml`` says why it may not.
"""
