#ifndef RELAYD_CSTREAMIO_H
#define RELAYD_CSTREAMIO_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <openssl/bio.h>

/// The bytes of one TCP or TLS client connection between its socket and the relay: the
/// ciphertext just read from the socket that OpenSSL has not taken yet (TLS only; it points into
/// the loop's read buffer and is empty between reads), and the bytes queued for the socket
/// (plaintext for TCP, TLS records for TLS), written at the end of the loop iteration. `lock`
/// is the connection's: other loop threads queue packets on it too.
typedef struct relayd_stream_io {
    pthread_mutex_t lock;
    const unsigned char *input;
    size_t input_length;
    unsigned char *output;
    size_t output_start;
    size_t output_end;
    size_t output_capacity;
    /// Appends that would queue more than this many bytes fail (a client that does not read).
    size_t output_limit;
} relayd_stream_io;

/// Sets up an empty `io` whose queue holds at most `output_limit` bytes.
void relayd_stream_io_init(relayd_stream_io *io, size_t output_limit);

/// Frees the queue's memory and the lock.
void relayd_stream_io_destroy(relayd_stream_io *io);

void relayd_stream_io_lock(relayd_stream_io *io);
void relayd_stream_io_unlock(relayd_stream_io *io);

/// Queues `count` bytes for the socket. 0 on success; -1 when the queue would pass
/// `output_limit` or memory ran out (nothing is queued then).
int relayd_stream_io_append(relayd_stream_io *io, const void *bytes, size_t count);

/// Bytes queued and not yet taken by the kernel.
size_t relayd_stream_io_pending(const relayd_stream_io *io);

/// Writes what is queued to `fd` in one write(2) and drops what the kernel took. Returns the
/// bytes written (0 when nothing was queued), or -1 with errno set (EAGAIN: the socket is full).
ssize_t relayd_stream_io_flush(relayd_stream_io *io, int fd);

/// Frees the queue's memory (the connection is gone).
void relayd_stream_io_release(relayd_stream_io *io);

/// A BIO for OpenSSL over `io`: reads take `input` (a retryable empty read when it is used up),
/// writes append to the output queue. One BIO serves both directions (SSL_set_bio with the same
/// BIO twice). NULL when OpenSSL cannot allocate it.
BIO *relayd_stream_io_bio(relayd_stream_io *io);

struct bufferevent;
struct event_base;

/// For `evhttp_set_bevcb`: a libevent OpenSSL bufferevent accepting TLS on a new SSL of
/// `ssl_ctx` (an `SSL_CTX *`); NULL when OpenSSL or libevent cannot make one.
struct bufferevent *relayd_https_bufferevent(struct event_base *base, void *ssl_ctx);

/// DTLS (docs/dtls.md). Sets the HelloVerifyRequest cookie callbacks on `ctx` (RFC 6347
/// §4.2.1): HMAC-SHA-256 of the client's address and port under a random per-process secret.
/// 0 on success.
int relayd_dtls_configure(SSL_CTX *ctx);

/// DTLSv1_listen on `ssl`, whose BIO reads the listener socket: 1 when a ClientHello with a valid
/// cookie came, with the client's address in `client` (a `sockaddr_storage`); 0 when nothing more can be read now
/// (ClientHellos without a cookie were answered, anything else dropped); negative on an error.
int relayd_dtls_listen(SSL *ssl, void *client);

/// Gives `ssl` a datagram BIO on `fd` (not closed with the BIO), connected to `peer` (a `sockaddr_storage`) when given.
/// 0 on success.
int relayd_dtls_use_socket(SSL *ssl, int fd, const void *peer);

#endif
