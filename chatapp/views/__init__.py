"""Pages and htmx endpoints.

The chat page and its turns, answer settings, branches, the library (the sidebar, search
and delete), and the 404 pages.
"""
