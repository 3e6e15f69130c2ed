"""Where we lean on Django's, Daphne's and Channels' internals, all in one place.

- `inline_middleware`: Django's own middleware classes, their hooks run on the event loop
  (`settings.MIDDLEWARE` names them).
- `daphne_websockets`: Daphne's websocket factory, with a bound on what a silent browser is held
  and permessage-deflate (`asgi.py` enables it).
- `daphne_bodies`: Daphne's request class, refusing a body past its route's limit
  (`access/body_limits.py`) while it arrives (`asgi.py` enables it).
- `channel_layer`: Channels' in-memory layer, cheap enough for hundreds of streams in a process
  (`settings.CHANNEL_LAYERS` names it).
- `sqlite_backend`: Django's SQLite backend on sqlean's driver, loading sqlite-vec into each
  connection (`settings.DATABASES` names it for sqlite URLs).

Each patch has a canary test (`tests/chatapp/patches/test_patches.py`) pinning what it relies on, so
an upgrade that changes those internals fails loudly.
"""
