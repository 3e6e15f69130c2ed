"""The page's one websocket.

The consumer and its routes, the message protocol, what it accepts from a browser, origin
and session checks, and riding out a channel layer outage.
"""
