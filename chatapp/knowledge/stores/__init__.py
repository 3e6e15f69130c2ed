"""Where a collection's vectors and full text are searched: the `VectorStore` and
`FullTextIndex` interfaces (`base.py`) and their implementations, chosen by `store_for`."""
