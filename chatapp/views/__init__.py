"""Pages and htmx endpoints.

The chat page and its turns, answer settings, branches, the files a conversation holds, the
library (the sidebar, search and delete), organising (pins, the archive, folders, several at
once, and the push that tells the user's other tabs: `sidebar_push`), importing another app's
export, shared links (made, listed, revoked, and the page anyone with one reads), and the 404
pages.
"""
