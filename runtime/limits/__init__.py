"""Limits on what a request may cost, checked before work starts: the memory a plan needs and the counts a user controls."""
