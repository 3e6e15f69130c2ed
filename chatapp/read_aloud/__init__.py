"""Read aloud: an answer spoken through the gateway's `/audio/speech`.

The offer on the page, the upstream request in a task of its own, the audio kept, and the
ledger rows it starts as.
"""
