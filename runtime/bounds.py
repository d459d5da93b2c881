"""The largest integer any argument may be, on every edge (the CLI's options, the library's arguments, the server's
query parameters and bodies): what both stores hold in an integer column (SQLite's INTEGER, PostgreSQL's bigint).

A larger turn, position or count reached SQL as an OverflowError (an internal error, HTTP 500) or as SQLite's
"datatype mismatch", said as the store being unavailable (HTTP 503, which monitoring reads as an outage): it is a
bad argument, refused where it comes in with the range it must be in. Its own module so that the CLI, which loads a
command's imports only when it runs, can bound every option without importing pydantic.
"""

LARGEST = 2**63 - 1
