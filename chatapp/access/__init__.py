"""What a user may do, and how often (who they are is `chatapp.identity`).

Sign-in attempts per account and client address, answers per user per minute, the size of a
request's body per route, and the models and tools a group's members may use.
"""
