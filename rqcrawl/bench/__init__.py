"""`rqcrawl bench`: rqcrawl against Scrapy on one generated local site."""
