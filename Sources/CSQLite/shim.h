#ifndef RELAYD_CSQLITE_SHIM_H
#define RELAYD_CSQLITE_SHIM_H
/* SQLite's C library (Debian's libsqlite3-dev): coturn's user database, read as coturn reads it
   (docs/userdb.md). */
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import. */
static inline sqlite3_destructor_type relayd_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
