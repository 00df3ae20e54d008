"""Reading sources: one reader per input format, and the guards that check what they read."""
