"""Starting a chat faster: assistants, saved prompts and who sees them (issue #41)."""
