"""One request to the web, and the rules every request obeys: the HTTP client (`http`) on a
guarded transport (`guard`, `transport`, `deadline`), cookies, robots.txt, the per-host
politeness gate, and the WARC archive of what was received.
"""
