"""Who may do what, how often.

Sign-in attempts per account and client address, answers per user per minute, and the size of
a request's body per route.
"""
