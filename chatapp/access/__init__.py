"""Who may do what, how often.

Sign-in attempts per account and client address, and answers per user per minute.
"""
