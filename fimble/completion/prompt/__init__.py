"""Prompts as token ids: FIM layouts, and prompts a client rendered itself, parsed back."""
