"""What a response says: HTML parsed into a title, fields and links (`extract`), canonical
URLs (`urls`), page-level directives (`directives`), whether a page needs a browser
(`rendering`), the user's page hook, and the change labels of revisits (`changes`). Pure
functions of their input: no settings, no Redis, no network.
"""
