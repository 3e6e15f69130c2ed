"""Pages and htmx endpoints.

The chat page and its turns, answer settings, branches, and the library (the sidebar, search
and delete).
"""
