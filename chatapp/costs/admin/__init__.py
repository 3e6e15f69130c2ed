"""The cost admin's pages: the ledger of generations with its summary and CSV export
(`generations`), spending limits (`limits`), feedback (`feedback`), and how their amounts are
shown (`amounts`). Registered by `chatapp/admin.py`, which imports them."""
