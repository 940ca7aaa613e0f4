"""The report stage: Markdown, HTML and CSV reports of results, their plots, and progress lines for long commands."""
