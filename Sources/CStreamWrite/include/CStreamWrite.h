#ifndef RELAYD_CSTREAMWRITE_H
#define RELAYD_CSTREAMWRITE_H

struct bufferevent;

/// Writes a socket bufferevent's queued output now, in one writev, instead of waiting for the
/// loop to report the socket writable. Returns the bytes written, 0 when nothing was queued,
/// -1 when the socket took nothing now (libevent's own write event then finishes the job and
/// reports any error). See stream_write.c.
int relayd_bufferevent_write_now(struct bufferevent *bev);

#endif
