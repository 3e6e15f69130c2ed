"""Tools from Model Context Protocol servers an admin connects (`McpServer`).

The official `mcp` SDK is the client (`client.py`); nothing here speaks the protocol itself. A
server's tools are listed on a schedule and on demand (`catalog.refresh`) and kept on its row, so
pages and requests never wait on it; each call opens a session of its own on the event loop of
the worker that runs the turn (`calls.run`), under a deadline, a byte cap and the user's Stop.
"""
