"""What a run looks like: the matrix report (Markdown, HTML, JSON), its history across runs,
the support window, and the screenshot of the page."""
