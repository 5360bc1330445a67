/* Direct writes for socket bufferevents (TCP and TLS clients).
 *
 * libevent's socket bufferevent writes only from its write event: new output adds the event
 * (epoll_ctl), the next epoll_wait reports the socket writable, the callback writes and, once
 * the output is empty, removes the event again (epoll_ctl). relayd writes each connection's
 * output once at the end of the loop iteration instead, doing what that callback does
 * (bufferevent_sock.c): the output's front is frozen outside the callback, so it is thawed
 * around the write; an emptied output removes the write event and triggers the write callback
 * (low watermark), which for a TLS filter lets it encrypt more. With the epoll changelist the
 * removal cancels the add made in the same iteration, so no epoll_ctl is made at all.
 * Needs struct bufferevent's fields, hence its own C target. */
#include <sys/types.h>
#include <sys/select.h>
#include <sys/time.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include "CStreamWrite.h"

int relayd_bufferevent_write_now(struct bufferevent *bev) {
    struct evbuffer *output = bufferevent_get_output(bev);
    if (evbuffer_get_length(output) == 0) return 0;
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd < 0) return -1;
    evbuffer_unfreeze(output, 1);
    int written = evbuffer_write(output, fd);
    evbuffer_freeze(output, 1);
    if (written > 0 && evbuffer_get_length(output) == 0) {
        event_del(&bev->ev_write);
        bufferevent_trigger(bev, EV_WRITE, 0);
    }
    return written;
}
