#ifndef RELAYD_CHIREDIS_SHIM_H
#define RELAYD_CHIREDIS_SHIM_H
/* hiredis (Debian's libhiredis-dev) and its libevent adapter: the cluster's Redis I/O runs on
   the main thread's libevent loop (docs/cluster.md). System headers first: docs/building.md. */
#include <sys/types.h>
#include <sys/select.h>
#include <sys/time.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

/* The adapter's attach takes a `struct event_base *`; Swift sees libevent's bases as opaque
   pointers from another module, so the cast happens here. */
static inline int relayd_redis_attach(redisAsyncContext *context, void *base) {
    return redisLibeventAttach(context, (struct event_base *)base);
}

/* The async context's fields Swift reads (its error and the caller's data pointer). */
static inline int relayd_redis_async_error(const redisAsyncContext *context) { return context->err; }
static inline const char *relayd_redis_async_errstr(const redisAsyncContext *context) {
    return context->errstr ? context->errstr : "";
}
static inline const char *relayd_redis_connection_errstr(const redisAsyncContext *context) {
    return context->c.errstr;
}
static inline void relayd_redis_set_data(redisAsyncContext *context, void *data) { context->data = data; }
static inline void *relayd_redis_get_data(const redisAsyncContext *context) { return context->data; }

#endif
