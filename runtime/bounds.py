"""The largest integer any argument may be, on every edge (the CLI's options, the library's arguments, the server's
query parameters and bodies): what both stores hold in an integer column (SQLite's INTEGER, PostgreSQL's bigint).

A larger turn, position or count reached SQL as an OverflowError (an internal error, HTTP 500) or as SQLite's
"datatype mismatch", said as the store being unavailable (HTTP 503, which monitoring reads as an outage): it is a
bad argument, refused where it comes in with the range it must be in. Its own module so that the CLI, which loads a
command's imports only when it runs, can bound every option without importing pydantic.
"""

LARGEST = 2**63 - 1

#: The longest a worker's claim on a session lasts without renewal (`--lease-s`, the library's `lease_s`): how long
#: a dead holder's sessions wait for another. Far beyond it (1e20) the claim's expiry overflowed a datetime.
MAX_LEASE_S = 86_400.0
#: The longest wait between two looks for new work or events (`--poll`, the library's `poll`): a day. Far beyond it
#: a wait overflows (`threading.Event.wait(1e20)` raises OverflowError) or never ends.
MAX_POLL_S = 86_400.0
#: The longest idle time before a worker exits (`--idle-exit`, the library's `idle_exit`): a week.
MAX_IDLE_EXIT_S = 604_800.0
