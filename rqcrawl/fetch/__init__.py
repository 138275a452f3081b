"""One request to the web, and the rules every request obeys: the fetch (`http`) through an
HTTP client of the `clients` seam that connects through the guard (`guard`) under the
deadline (`deadline`), the crawl's proxies, cookies, robots.txt, the per-host politeness
gate, and the WARC archive of what was received.
"""
