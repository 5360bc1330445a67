// The HTTPS side of the HTTP API (docs/tls.md): evhttp asks this callback for
// each accepted connection's bufferevent, which here is libevent's OpenSSL bufferevent over a
// new SSL of the API's SSL_CTX (the `arg` evhttp_set_bevcb was given).
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "CStreamIO.h"

struct bufferevent *relayd_https_bufferevent(struct event_base *base, void *ssl_ctx) {
    SSL *ssl = SSL_new((SSL_CTX *)ssl_ctx);
    // NULL here makes libevent 2.1's evhttp fall back to a plain socket bufferevent for this one
    // connection. SSL_new fails only when memory is exhausted; see the note in
    // docs/architecture.md ("Where it is going").
    if (ssl == NULL) return NULL;
    struct bufferevent *bev =
        bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        SSL_free(ssl);
        return NULL;
    }
    // A client that closes without close_notify has ended its request; nothing to report.
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}
