#ifndef RELAYD_CSTREAMIO_H
#define RELAYD_CSTREAMIO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
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
    /// Bytes ever queued (it only grows): what one call queued is the difference.
    unsigned long long appended;
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

/// Room for `count` more bytes at the end of the queue, to be written there and then queued by
/// `relayd_stream_io_commit` (nothing is queued until then); NULL as `relayd_stream_io_append`
/// fails.
unsigned char *relayd_stream_io_reserve(relayd_stream_io *io, size_t count);
void relayd_stream_io_commit(relayd_stream_io *io, size_t count);

/// Bytes queued and not yet taken by the kernel.
size_t relayd_stream_io_pending(const relayd_stream_io *io);

/// Writes what is queued to `fd` in one write(2) and drops what the kernel took. Returns the
/// bytes written (0 when nothing was queued), or -1 with errno set (EAGAIN: the socket is full).
ssize_t relayd_stream_io_flush(relayd_stream_io *io, int fd);

/// Frees the queue's memory (the connection is gone).
void relayd_stream_io_release(relayd_stream_io *io);
/// glibc's malloc_trim(0): whole free pages of every arena back to the kernel (idle
/// connections' freed buffers, docs/benchmark.md). 1 when memory was given back.
int relayd_trim_heap(void);

/// A BIO for OpenSSL over `io`: reads take `input` (a retryable empty read when it is used up),
/// writes append to the output queue. One BIO serves both directions (SSL_set_bio with the same
/// BIO twice). NULL when OpenSSL cannot allocate it.
BIO *relayd_stream_io_bio(relayd_stream_io *io);

/// TLS 1.3 records after the handshake (RFC 8446 §5), without the `SSL` object
/// (docs/tls.md, "After the handshake"): OpenSSL runs the handshake, its key-log callback hands
/// over the application traffic secrets, and the connection then keeps only an AEAD context, IV,
/// sequence number and secret per direction. TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and
/// TLS_CHACHA20_POLY1305_SHA256; KeyUpdate (§4.6.3) both ways; alerts (§6). Not thread-safe: the
/// connection's lock guards it as it guards the `SSL`.
typedef struct relayd_tls_records relayd_tls_records;

/// `relayd_tls_records_open`: the client's close_notify came.
#define RELAYD_TLS_RECORDS_CLOSED (-1)
/// `relayd_tls_records_open`: a fatal error (`relayd_tls_records_failure` says which); the alert
/// that says so is queued.
#define RELAYD_TLS_RECORDS_FAILED (-2)
/// `relayd_tls_records_open`: `out` has less room than a record's plaintext can take.
#define RELAYD_TLS_RECORDS_NEEDS_ROOM (-3)
/// The room `relayd_tls_records_open` asks for in `out`: a record's ciphertext can be this long
/// (§5.2), and it is opened in place there before its length is known.
#define RELAYD_TLS_RECORDS_ROOM 16640

/// Makes the sessions of `ctx` keep their TLS 1.3 application traffic secrets (the key-log
/// callback) for `relayd_tls_records_new`. 0 on success.
int relayd_tls_records_capture(SSL_CTX *ctx);

/// The records of `ssl`, whose handshake just completed as a server and queued its last `written`
/// bytes in `io` (the session tickets, under the server's traffic key): NULL when the session is
/// not TLS 1.3 with one of the three suites, its secrets were not captured, OpenSSL holds
/// unread input, those bytes are not whole records, or memory ran out (the session stays with
/// OpenSSL then). The captured secrets are wiped from `ssl` either way; free it after. A
/// client's side (benchmarks, load generators) is taken the same way with `written` 0; the
/// server's session tickets that reach it later are skipped.
relayd_tls_records *relayd_tls_records_new(SSL *ssl, const relayd_stream_io *io, size_t written);
void relayd_tls_records_free(relayd_tls_records *records);

/// Seals `count` bytes (any number, one record per 2^14) as application data into the queue of
/// `io`. 0 on success; -1 when the queue refused them or the AEAD failed.
int relayd_tls_records_seal(relayd_tls_records *records, relayd_stream_io *io, const void *bytes, size_t count);

/// Queues close_notify (RFC 8446 §6.1); nothing more can be sealed after it.
int relayd_tls_records_close_notify(relayd_tls_records *records, relayd_stream_io *io);

/// Opens what `io` holds as input (consumed as it goes; a record cut off is kept) into `out`: the
/// application data of one record (> 0), 0 when the input is used up, or a
/// RELAYD_TLS_RECORDS_ code. Records without application data (KeyUpdate, whose answer is queued
/// in `io`; user_canceled; empty ones) are opened on the way. `capacity` must be at least
/// RELAYD_TLS_RECORDS_ROOM.
long relayd_tls_records_open(relayd_tls_records *records, relayd_stream_io *io, unsigned char *out, size_t capacity);

/// The sequence numbers of the next record to open and to seal (RFC 8446 §5.3).
void relayd_tls_records_sequences(const relayd_tls_records *records, uint64_t *read, uint64_t *write);
/// Sets them: both ends must agree, so only where one process holds both (stun-bench checks
/// the KeyUpdate relayd sends before its write sequence reaches 2^24, §5.5).
void relayd_tls_records_set_sequences(relayd_tls_records *records, uint64_t read, uint64_t write);

/// Why the last call failed.
const char *relayd_tls_records_failure(const relayd_tls_records *records);

/// Frees the buffer of a part record when none is kept (an idle connection); 1 when it did.
int relayd_tls_records_release_buffers(relayd_tls_records *records);

/// The most bytes `relayd_tls_records_export` writes: 4 + 2 × (48 + 8) + 2 for the fixed fields
/// with two SHA-384 secrets, and 5 + 16,640 − 1 for a record cut off one byte short of its
/// longest (RFC 8446 §5.2). A plain number, so Swift imports it.
#define RELAYD_TLS_RECORDS_STATE_MAX 16762

/// A server's record state as bytes, for a live upgrade (docs/live-upgrade.md, "TLS clients"):
/// the suite, per direction the traffic secret and the sequence number, and the part of a record
/// read so far. Its length, or -1 when the session cannot move (closed, failed, a client's side,
/// or `capacity` too small). The bytes hold the session's secrets: they go only to the process
/// that serves the session next.
long relayd_tls_records_export(const relayd_tls_records *records, unsigned char *out, size_t capacity);

/// Records that go on from what `relayd_tls_records_export` wrote in another process; NULL when
/// the bytes are not such a state (an unknown format or suite, lengths that disagree, a part
/// record that cannot be one) or memory ran out.
relayd_tls_records *relayd_tls_records_import(const unsigned char *state, size_t length);

/// Overwrites `count` bytes at `bytes` with zeros the compiler cannot drop (OPENSSL_cleanse).
void relayd_tls_records_wipe(void *bytes, size_t count);

struct bufferevent;
struct event_base;

/// For `evhttp_set_bevcb`: a libevent OpenSSL bufferevent accepting TLS on a new SSL of
/// `ssl_ctx` (an `SSL_CTX *`); NULL when OpenSSL or libevent cannot make one.
struct bufferevent *relayd_https_bufferevent(struct event_base *base, void *ssl_ctx);

/// DTLS (docs/dtls.md). Sets the HelloVerifyRequest cookie callbacks on `ctx` (RFC 6347
/// §4.2.1): HMAC-SHA-256 of the client's address and port under a random per-process secret.
/// 0 on success.
int relayd_dtls_configure(SSL_CTX *ctx);
/// The cookie secret (32 bytes): set it before the first `relayd_dtls_configure` to keep the
/// one a predecessor process used (docs/live-upgrade.md); -1 when set already or of another
/// length. Read it back once set; -1 before.
int relayd_dtls_set_cookie_secret(const unsigned char *secret, size_t length);
int relayd_dtls_cookie_secret(unsigned char *out, size_t length);

/// DTLSv1_listen on `ssl`, whose BIO reads the listener socket: 1 when a ClientHello with a valid
/// cookie came, with the client's address in `client` (a `sockaddr_storage`); 0 when nothing more can be read now
/// (ClientHellos without a cookie were answered, anything else dropped); negative on an error.
int relayd_dtls_listen(SSL *ssl, void *client);

/// Gives `ssl` a datagram BIO on `fd` (not closed with the BIO), connected to `peer` (a `sockaddr_storage`) when given.
/// 0 on success.
int relayd_dtls_use_socket(SSL *ssl, int fd, const void *peer);

/// What a DTLS session's socket saw before OpenSSL (docs/dtls.md): a filter BIO between the
/// session and its datagram BIO sets aside a ClientHello (epoch 0) that arrives once the
/// handshake is done, for the stateless cookie check of a client that restarted (RFC 6347
/// §4.2.8), unless it is the session's own ClientHello again; it drops datagrams that are not
/// DTLS records (RFC 6347 §4.1.2.7: discarded silently) and ignores the ICMP errors the
/// connected socket reports, counting both. One per session, allocated once; not owned by the
/// BIOs.
typedef struct relayd_dtls_io relayd_dtls_io;

/// A new one (nothing set aside, not diverting); NULL without memory.
relayd_dtls_io *relayd_dtls_io_new(void);
void relayd_dtls_io_free(relayd_dtls_io *io);

/// The handshake of `ssl` is done: from now on ClientHellos are set aside instead of reaching
/// OpenSSL, except a duplicate or late copy of the one that made the session (same random),
/// which is dropped.
void relayd_dtls_io_handshake_done(relayd_dtls_io *io, const SSL *ssl);

/// 1 while a ClientHello set aside waits for `relayd_dtls_listen_on_session`.
int relayd_dtls_io_has_hello(const relayd_dtls_io *io);

/// Datagrams dropped and ICMP errors ignored since the last call (not DTLS records, a
/// ClientHello that could not be set aside); the count starts again at 0.
unsigned long relayd_dtls_io_take_dropped(relayd_dtls_io *io);

/// Gives `ssl` a datagram BIO on `fd` (not closed with the BIO) connected to `peer` (a
/// `sockaddr_storage`), behind the filter of `io`. 0 on success.
int relayd_dtls_use_session_socket(SSL *ssl, int fd, const void *peer, relayd_dtls_io *io);

/// The cookie check of the ClientHello `io` set aside, by DTLSv1_listen on `fresh` (a new SSL of
/// the DTLS context), which gets the session's socket `fd` connected to `peer`: 1 when its cookie
/// is valid (`fresh` holds the ClientHello and goes on with the handshake on the socket); 0 when
/// it had none or a stale one and a HelloVerifyRequest went back from the socket (RFC 6347
/// §4.2.1); negative when it was dropped (malformed, `fresh` NULL, no memory). Nothing stays set
/// aside.
int relayd_dtls_listen_on_session(SSL *fresh, int fd, const void *peer, relayd_dtls_io *io);

/// DTLS on a UDP port plain STUN/TURN shares (docs/dtls.md): the listener's loop sorts datagrams
/// by their first byte (RFC 7983 §7) and hands DTLS ones here. Gives `ssl` the listener socket
/// `fd`, unconnected, behind the filter of `io` (which replays one datagram at a time). 0 on
/// success.
int relayd_dtls_use_listener_socket(SSL *ssl, int fd, relayd_dtls_io *io);

/// DTLSv1_listen over one datagram from `peer` (a `sockaddr_storage`) that the listener read:
/// as `relayd_dtls_listen`, 1 with the client in `client` when it is a ClientHello with a valid
/// cookie, 0 when it was answered (a HelloVerifyRequest to `peer`) or dropped, -1 when OpenSSL
/// failed (the session should be made anew), -2 when it never reached OpenSSL (larger than a
/// ClientHello can be, no memory, an unknown address family). Drops are counted in `io`.
int relayd_dtls_listen_datagram(SSL *ssl, relayd_dtls_io *io, const void *datagram, size_t length, const void *peer,
                                void *client);

#endif
