"""MySQL and MariaDB: INSERT IGNORE, and no UPDATE ... RETURNING (the two statements of
Dialect.take_rows)."""

from __future__ import annotations

from sqlalchemy import Table
from sqlalchemy.dialects import mysql
from sqlalchemy.sql import Executable

from rqcrawl.frontier.dialects.base import Dialect


class MySQL(Dialect):
    names = ("mysql", "mariadb")
    drivers = {"mysql": "mysql+pymysql"}

    def insert_new(self, table: Table, values: dict) -> Executable:
        return mysql.insert(table).values(values).prefix_with("IGNORE")
