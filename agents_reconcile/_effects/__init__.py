"""Tools' external effects: an idempotency key per tool call, an intent before the body runs
and a receipt after, kept in the intent journal, so that no crash runs a side effect twice and
no run goes on from an effect nobody can vouch for."""
