"""What a response says: HTML parsed into a title, fields and links (`extract`), canonical
URLs (`urls`), which links are followed (`rules`), sitemaps, the user's page hook, and the
change labels of revisits (`changes`). Pure functions of their input: no Redis, no network.
"""
