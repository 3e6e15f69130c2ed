"""Pages and htmx endpoints.

The chat page and its turns, answer settings, branches, the files a conversation holds, the
library (the sidebar, search and delete), shared links (made, listed, revoked, and the page
anyone with one reads), and the 404 pages.
"""
