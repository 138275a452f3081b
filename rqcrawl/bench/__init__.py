"""`rqcrawl bench`: rqcrawl against Scrapy on one generated local site. Only that command
imports it (rqcrawl.cli loads it lazily), so the others never pay for it."""
