"""Knowledge collections: documents a user (or an admin, for everyone or for groups) gathers so
that answers can draw on them and cite them.

A file is read into chunks (`reading.py`, `chunking.py`) and each chunk embedded through the
gateway (`embedding.py`) by background tasks (`tasks.py`, Django's Tasks framework); its vectors
go to a `VectorStore` and its text to a `FullTextIndex` (`stores/`). `retrieval.py` finds the
passages for a question in the collections a user may use: vectors and full text, fused by
reciprocal rank. Documents are untrusted: their text is data, quoted, never instructions.
"""
