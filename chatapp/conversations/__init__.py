"""Conversations and their messages.

Making turns, the message tree (branches, the shown path, context), an answer's state in
words, search, export, organising
(pins, the archive, folders), importing ChatGPT's and Open WebUI's exports, shared links, and
what a conversation asks of its answers (request options).
"""
