"""One exporter per output format (`base.Exporter`), chosen by name through the `exporters`
setting (`registry`), in the style of Scrapy's FEED_EXPORTERS: a format a user adds is a
class of their own named there as "module:Class"."""
