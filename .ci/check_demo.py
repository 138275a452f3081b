"""The records of the README's first command (`rqcrawl demo -o pages.jsonl`): the demo web's
16 URLs, each outcome the README names. Usage: check_demo.py FILE SECONDS."""

import json
import sys

path, seconds = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as lines:
    rows = [json.loads(line) for line in lines]
by_path = {row["url"].split("/", 3)[-1]: row for row in rows}
checks = {
    "16 records": len(rows) == 16,
    "14 fetched": sum(row["outcome"] == "fetched" for row in rows) == 14,
    "robots.txt kept one out": by_path["private/draft.html"]["outcome"] == "robots_disallowed",
    "the sitemap's page": by_path["orphan.html"]["source"] == "sitemap",
    "the broken link": by_path["guide/missing.html"]["reason"] == "http_404",
    "max depth 3": "archive/2025.html" not in by_path,
}
failed = [name for name, ok in checks.items() if not ok]
if failed:
    sys.exit(f"README's first command: wrong records ({', '.join(failed)}): {rows}")
print(f"README's first command: {len(rows)} records as expected, {seconds} s in all")
