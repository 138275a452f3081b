"""rqcrawl: a distributed web crawler in which every URL is an RQ job."""

__version__ = "0.1.0"
