"""The page's one websocket.

The consumer and its routes, what it accepts from a browser, and origin and session checks. The
messages it forwards are `chatapp.messaging`'s.
"""
