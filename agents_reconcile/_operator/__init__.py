"""What an operator uses: opening any journal or store by address, the status of pending
intents, the decision trail, resolutions, and the damage check of a stored history. The
``agents-reconcile`` command is built on these."""
