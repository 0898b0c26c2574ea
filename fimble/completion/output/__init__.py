"""From generated text to the suggestion shown: the syntax at the cursor, stop rules, clean-up."""
