"""Voice input: a recording from the composer's microphone, turned into text by the gateway's
`/audio/transcriptions`.

Which gateway transcribes (`offer`), the ledger row each transcription is (`records`), the one
upstream request (`requests`) and the endpoint the page posts the recording to (`views`).
"""
