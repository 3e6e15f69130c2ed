"""Conversations and their messages.

Making turns, the message tree (branches, the shown path, context), search, export, shared
links, and what a conversation asks of its answers (request options).
"""
