"""Where we lean on Django's, Daphne's and Channels' internals, all in one place.

Each patch has a canary test (`tests/chatapp/test_patches.py`) pinning what it relies on, so
an upgrade that changes those internals fails loudly.
"""
