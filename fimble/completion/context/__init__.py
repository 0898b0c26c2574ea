"""Repository context: which snippets of other files a prompt shows, and why (gathering and ranking)."""
