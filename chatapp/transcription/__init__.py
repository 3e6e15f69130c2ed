"""Voice input: a recording from the composer's microphone, turned into text by the gateway's
`/audio/transcriptions`.

Which gateway transcribes (`offer`), the ledger row each transcription is (`records`) and the
one upstream request (`requests`); the endpoint the page posts the recording to is a view
(`chatapp/views/transcription.py`).
"""
