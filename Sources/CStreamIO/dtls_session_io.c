// A DTLS session's view of its socket before OpenSSL (docs/dtls.md): a filter BIO over the
// session's datagram BIO. Once the handshake is done it sets aside a ClientHello of epoch 0, which
// OpenSSL would drop in silence, so that a client that restarted from the same address and port
// can be cookie-checked statelessly and get a new session (RFC 6347 §4.2.8); a copy of the
// session's own ClientHello (same random) that comes late is not a restart. It drops datagrams
// that are not DTLS records, counting them (RFC 6347 §4.1.2.7), an empty one included, which
// OpenSSL would take for the end of the socket, and the ICMP errors a connected socket reports
// (a client down while data is sent to it, or anyone forging ICMP), which OpenSSL would take for
// a fatal error. Everything else passes through untouched.
#include "CStreamIO.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>

// A ClientHello fits one datagram (DTLSv1_listen takes no fragments); a larger one is dropped.
#define HELLO_CAPACITY 2048
#define RECORD_HEADER 13
#define HANDSHAKE_HEADER 12
// Where a ClientHello's random starts in its datagram: after the record and handshake headers
// and client_version (RFC 6347 §4.2.2, §4.3.2).
#define HELLO_RANDOM (RECORD_HEADER + HANDSHAKE_HEADER + 2)
#define RANDOM_SIZE 32
// Datagrams one read looks at before it lets the loop come back (a flood of garbage).
#define READS_PER_CALL 64

struct relayd_dtls_io {
    unsigned char hello[HELLO_CAPACITY];
    size_t hello_length;   // > 0: a ClientHello set aside
    int divert;            // the handshake is done: set ClientHellos aside
    unsigned char random[RANDOM_SIZE]; // the random of the ClientHello that made the session
    int replay;            // reads return the ClientHello set aside (the cookie check)
    unsigned long writes;  // datagrams written through the filter
    unsigned long dropped; // datagrams dropped since the last relayd_dtls_io_take_dropped
};

relayd_dtls_io *relayd_dtls_io_new(void) { return calloc(1, sizeof(relayd_dtls_io)); }

void relayd_dtls_io_free(relayd_dtls_io *io) { free(io); }

void relayd_dtls_io_handshake_done(relayd_dtls_io *io, const SSL *ssl) {
    io->divert = SSL_get_client_random(ssl, io->random, RANDOM_SIZE) == RANDOM_SIZE;
}

int relayd_dtls_io_has_hello(const relayd_dtls_io *io) { return io->hello_length > 0; }

unsigned long relayd_dtls_io_take_dropped(relayd_dtls_io *io) {
    unsigned long dropped = io->dropped;
    io->dropped = 0;
    return dropped;
}

// A DTLS record header (RFC 6347 §4.1): a content type OpenSSL knows (change_cipher_spec,
// alert, handshake, application_data, heartbeat) and a DTLS major version.
static int is_record(const unsigned char *d, int n) {
    return n >= RECORD_HEADER && d[0] >= 20 && d[0] <= 24 && d[1] == 0xFE;
}

// An error a connected UDP socket reports for an ICMP message (port or host unreachable, a
// smaller path MTU): nothing the client sent, and unauthenticated.
static int is_icmp_error(int error) {
    return error == ECONNREFUSED || error == EHOSTUNREACH || error == ENETUNREACH || error == EHOSTDOWN
        || error == ENONET || error == ENOPROTOOPT || error == EMSGSIZE;
}

// The first record is a handshake record of epoch 0 carrying a ClientHello (RFC 6347 §4.2.2).
static int is_client_hello(const unsigned char *d, int n) {
    return n >= RECORD_HEADER + HANDSHAKE_HEADER && d[0] == 22 && d[3] == 0 && d[4] == 0
        && d[RECORD_HEADER] == 1;
}

static int filter_read(BIO *b, char *out, int size) {
    relayd_dtls_io *io = BIO_get_data(b);
    BIO *next = BIO_next(b);
    BIO_clear_retry_flags(b);
    if (io == NULL || next == NULL || out == NULL) return -1;
    if (io->replay) {
        // DTLSv1_listen reads the ClientHello set aside, once, and nothing from the socket.
        if (io->hello_length == 0 || size < 0 || (size_t)size < io->hello_length) {
            BIO_set_retry_read(b);
            return -1;
        }
        size_t length = io->hello_length;
        memcpy(out, io->hello, length);
        io->hello_length = 0;
        return (int)length;
    }
    for (int i = 0; i < READS_PER_CALL; i++) {
        int n = BIO_read(next, out, size);
        if (n < 0) {
            if (!BIO_should_retry(next) && is_icmp_error(errno)) {
                io->dropped++;
                continue;
            }
            BIO_copy_next_retry(b);
            return n;
        }
        const unsigned char *d = (const unsigned char *)out;
        if (!is_record(d, n)) {
            io->dropped++;
            continue;
        }
        if (io->divert && is_client_hello(d, n)) {
            // The session's own ClientHello, duplicated or late (its random): no restart.
            int late = n >= HELLO_RANDOM + RANDOM_SIZE && memcmp(d + HELLO_RANDOM, io->random, RANDOM_SIZE) == 0;
            if (!late && io->hello_length == 0 && (size_t)n <= sizeof io->hello) {
                memcpy(io->hello, d, (size_t)n);
                io->hello_length = (size_t)n;
            } else {
                io->dropped++;
            }
            // SSL_read answers "want read": the session's owner sees the ClientHello first.
            BIO_set_retry_read(b);
            return -1;
        }
        return n;
    }
    BIO_set_retry_read(b);
    return -1;
}

static int filter_write(BIO *b, const char *in, int length) {
    relayd_dtls_io *io = BIO_get_data(b);
    BIO *next = BIO_next(b);
    BIO_clear_retry_flags(b);
    if (io == NULL || next == NULL) return -1;
    int n = BIO_write(next, in, length);
    if (n > 0) io->writes++;
    BIO_copy_next_retry(b);
    return n;
}

static long filter_ctrl(BIO *b, int cmd, long num, void *ptr) {
    BIO *next = BIO_next(b);
    return next == NULL ? 0 : BIO_ctrl(next, cmd, num, ptr);
}

static long filter_callback_ctrl(BIO *b, int cmd, BIO_info_cb *fp) {
    BIO *next = BIO_next(b);
    return next == NULL ? 0 : BIO_callback_ctrl(next, cmd, fp);
}

static int filter_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

static int filter_destroy(BIO *b) {
    BIO_set_data(b, NULL);
    return 1;
}

static BIO_METHOD *filter_method;
static CRYPTO_ONCE filter_once = CRYPTO_ONCE_STATIC_INIT;

static void make_filter_method(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "relayd DTLS session filter");
    if (method == NULL) return;
    if (BIO_meth_set_read(method, filter_read) != 1 || BIO_meth_set_write(method, filter_write) != 1
        || BIO_meth_set_ctrl(method, filter_ctrl) != 1 || BIO_meth_set_callback_ctrl(method, filter_callback_ctrl) != 1
        || BIO_meth_set_create(method, filter_create) != 1 || BIO_meth_set_destroy(method, filter_destroy) != 1) {
        BIO_meth_free(method);
        return;
    }
    filter_method = method;
}

// Gives `ssl` a datagram BIO on `fd` (connected to `peer` when given, else unconnected) under
// the filter of `io`: the SSL owns both.
static int use_filtered_socket(SSL *ssl, int fd, const void *peer, relayd_dtls_io *io) {
    if (io == NULL || !CRYPTO_THREAD_run_once(&filter_once, make_filter_method) || filter_method == NULL) return -1;
    BIO *filter = BIO_new(filter_method);
    if (filter == NULL) return -1;
    BIO_set_data(filter, io);
    if (relayd_dtls_use_socket(ssl, fd, peer) != 0) {
        BIO_free(filter);
        return -1;
    }
    BIO *dgram = SSL_get_rbio(ssl);
    BIO_up_ref(dgram);
    BIO_push(filter, dgram);
    SSL_set_bio(ssl, filter, filter);
    return 0;
}

int relayd_dtls_use_session_socket(SSL *ssl, int fd, const void *peer, relayd_dtls_io *io) {
    // The session's socket is connected to its client.
    return peer == NULL ? -1 : use_filtered_socket(ssl, fd, peer, io);
}

int relayd_dtls_listen_on_session(SSL *fresh, int fd, const void *peer, relayd_dtls_io *io) {
    if (fresh == NULL || io->hello_length == 0) {
        io->hello_length = 0;
        return -1;
    }
    if (relayd_dtls_use_session_socket(fresh, fd, peer, io) != 0) {
        io->hello_length = 0;
        return -1;
    }
    BIO_ADDR *client = BIO_ADDR_new();
    if (client == NULL) {
        io->hello_length = 0;
        return -1;
    }
    unsigned long writes = io->writes;
    io->replay = 1;
    int result = DTLSv1_listen(fresh, client);
    io->replay = 0;
    io->hello_length = 0;
    BIO_ADDR_free(client);
    if (result == 1) {
        // The new handshake is under way: its ClientHellos are OpenSSL's until it is done.
        io->divert = 0;
        return 1;
    }
    return result == 0 && io->writes != writes ? 0 : -1;
}

int relayd_dtls_use_listener_socket(SSL *ssl, int fd, relayd_dtls_io *io) {
    // Unconnected: the listener writes to the peer each datagram names.
    return use_filtered_socket(ssl, fd, NULL, io);
}

int relayd_dtls_listen_datagram(SSL *ssl, relayd_dtls_io *io, const void *datagram, size_t length, const void *peer,
                                void *client) {
    const struct sockaddr_storage *source = peer;
    BIO *filter = SSL_get_rbio(ssl);
    BIO *dgram = filter == NULL ? NULL : BIO_next(filter);
    // DTLSv1_listen takes a ClientHello in one datagram; anything larger is not one.
    if (io == NULL || dgram == NULL || length == 0 || length > sizeof io->hello) {
        if (io != NULL) io->dropped++;
        return -2;
    }
    BIO_ADDR *address = BIO_ADDR_new();
    if (address == NULL) {
        io->dropped++;
        return -2;
    }
    int made = 0;
    if (source->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)source;
        made = BIO_ADDR_rawmake(address, AF_INET, &sin->sin_addr, 4, sin->sin_port);
    } else if (source->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)source;
        made = BIO_ADDR_rawmake(address, AF_INET6, &sin6->sin6_addr, 16, sin6->sin6_port);
    }
    // The cookie is made for, and a HelloVerifyRequest goes back to, the datagram's source.
    if (made) BIO_dgram_set_peer(dgram, address);
    BIO_ADDR_free(address);
    if (!made) {
        io->dropped++;
        return -2;
    }
    memcpy(io->hello, datagram, length);
    io->hello_length = length;
    io->replay = 1;
    unsigned long writes = io->writes;
    int result = relayd_dtls_listen(ssl, client);
    io->replay = 0;
    io->hello_length = 0;
    // Neither a session nor a HelloVerifyRequest: OpenSSL dropped it (not a ClientHello).
    if (result < 0 || (result == 0 && io->writes == writes)) io->dropped++;
    return result;
}
