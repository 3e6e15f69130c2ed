"""Model output as safe HTML.

Markdown through one sanitizer, code highlighting, media checks, the render pool that keeps
all of it off the event loop, and the stored final render.
"""
