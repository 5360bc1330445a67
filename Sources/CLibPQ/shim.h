#ifndef RELAYD_CLIBPQ_SHIM_H
#define RELAYD_CLIBPQ_SHIM_H
/* libpq (Debian's libpq-dev): coturn's user database in PostgreSQL (docs/userdb.md). */
#include <libpq-fe.h>
#endif
