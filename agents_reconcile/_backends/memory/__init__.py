"""In this process only: the journal (``journal``) and the revisioned store (``store``) that
tests and the demo use."""
