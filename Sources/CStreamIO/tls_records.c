/* TLS 1.3 records after the handshake, without OpenSSL's SSL object; see CStreamIO.h and
 * docs/tls.md ("After the handshake").
 *
 * OpenSSL runs the handshake. Its key-log callback hands over the two application traffic
 * secrets as it derives them; once the handshake is done the connection keeps only what
 * RFC 8446 §5 needs to protect and open records: per direction an AEAD context keyed once, the
 * static IV and the 64-bit sequence number (§5.3), and the traffic secret for KeyUpdate (§4.6.3,
 * §7.2). The AEAD is OpenSSL's (EVP); this file frames records around it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>
#include "CStreamIO.h"
#include "tls_records_internal.h"

enum { HS_NEW_SESSION_TICKET = 4, HS_KEY_UPDATE = 24 };
/* RFC 8446 §6. */
enum {
    ALERT_CLOSE_NOTIFY = 0,
    ALERT_UNEXPECTED_MESSAGE = 10,
    ALERT_BAD_RECORD_MAC = 20,
    ALERT_RECORD_OVERFLOW = 22,
    ALERT_ILLEGAL_PARAMETER = 47,
    ALERT_DECODE_ERROR = 50,
    ALERT_INTERNAL_ERROR = 80,
    ALERT_USER_CANCELED = 90,
};

/* ---- the secrets, captured during the handshake ---- */

typedef struct {
    unsigned char client[MAX_SECRET];
    unsigned char server[MAX_SECRET];
    size_t client_length;
    size_t server_length;
} captured_secrets;

static int secrets_index = -1;
static pthread_once_t secrets_once = PTHREAD_ONCE_INIT;

static void secrets_free(void *parent, void *pointer, CRYPTO_EX_DATA *data, int index, long argl, void *argp) {
    (void)parent;
    (void)data;
    (void)index;
    (void)argl;
    (void)argp;
    if (pointer == NULL) return;
    OPENSSL_cleanse(pointer, sizeof(captured_secrets));
    free(pointer);
}

static void secrets_index_init(void) { secrets_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, secrets_free); }

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "LABEL <client random, hex> <secret, hex>" (the NSS key log format OpenSSL writes). */
static void keylog(const SSL *ssl, const char *line) {
    static const char client_label[] = "CLIENT_TRAFFIC_SECRET_0 ";
    static const char server_label[] = "SERVER_TRAFFIC_SECRET_0 ";
    int is_client = strncmp(line, client_label, sizeof(client_label) - 1) == 0;
    if (!is_client && strncmp(line, server_label, sizeof(server_label) - 1) != 0) return;
    const char *hex = strchr(line + sizeof(client_label) - 1, ' ');
    if (hex == NULL) return;
    hex += 1;
    size_t digits = strlen(hex);
    if (digits % 2 != 0 || digits / 2 > MAX_SECRET || digits == 0) return;
    captured_secrets *secrets = SSL_get_ex_data(ssl, secrets_index);
    if (secrets == NULL) {
        secrets = calloc(1, sizeof(*secrets));
        if (secrets == NULL || SSL_set_ex_data((SSL *)ssl, secrets_index, secrets) != 1) {
            free(secrets);
            return;
        }
    }
    unsigned char *into = is_client ? secrets->client : secrets->server;
    for (size_t i = 0; i < digits / 2; i++) {
        int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0) return;
        into[i] = (unsigned char)(high << 4 | low);
    }
    if (is_client) secrets->client_length = digits / 2;
    else secrets->server_length = digits / 2;
}

int relayd_tls_records_capture(SSL_CTX *ctx) {
    pthread_once(&secrets_once, secrets_index_init);
    if (secrets_index < 0) return -1;
    SSL_CTX_set_keylog_callback(ctx, keylog);
    return 0;
}

/* ---- keys (RFC 8446 §7.1, §7.3) ---- */

/* HKDF-Expand-Label(secret, label, "", length) for length <= the hash length: one HMAC block,
 * T(1) = HMAC(secret, HkdfLabel || 0x01) (RFC 5869 §2.3). */
static int expand_label(const EVP_MD *md, const unsigned char *secret, size_t secret_length, const char *label,
                        unsigned char *out, size_t length) {
    unsigned char info[2 + 1 + 6 + 32 + 1 + 1];
    size_t label_length = strlen(label);
    if (length > (size_t)EVP_MD_get_size(md) || label_length > 32) return -1;
    size_t n = 0;
    info[n++] = (unsigned char)(length >> 8);
    info[n++] = (unsigned char)length;
    info[n++] = (unsigned char)(6 + label_length);
    memcpy(info + n, "tls13 ", 6);
    n += 6;
    memcpy(info + n, label, label_length);
    n += label_length;
    info[n++] = 0; /* empty context */
    info[n++] = 1; /* the block counter */
    unsigned char block[EVP_MAX_MD_SIZE];
    unsigned int block_length = 0;
    if (HMAC(md, secret, (int)secret_length, info, n, block, &block_length) == NULL) return -1;
    memcpy(out, block, length);
    OPENSSL_cleanse(block, sizeof(block));
    return 0;
}

/* Keys `d` from its `secret` (§7.3): the AEAD key and the static IV; the sequence restarts. */
static int direction_key(relayd_tls_records *r, direction *d, int encrypt) {
    unsigned char key[32];
    if (expand_label(r->md, d->secret, r->secret_length, "key", key, r->key_length) != 0) return -1;
    if (expand_label(r->md, d->secret, r->secret_length, "iv", d->iv, IV_LENGTH) != 0) return -1;
    int ok = EVP_CipherInit_ex(d->aead, r->cipher, NULL, key, NULL, encrypt) == 1;
    OPENSSL_cleanse(key, sizeof(key));
    d->sequence = 0;
    return ok ? 0 : -1;
}

/* KeyUpdate (§4.6.3): application_traffic_secret_N+1 = HKDF-Expand-Label(secret_N, "traffic upd", "", Hash.length). */
static int direction_update(relayd_tls_records *r, direction *d, int encrypt) {
    unsigned char next[MAX_SECRET];
    if (expand_label(r->md, d->secret, r->secret_length, "traffic upd", next, r->secret_length) != 0) return -1;
    memcpy(d->secret, next, r->secret_length);
    OPENSSL_cleanse(next, sizeof(next));
    return direction_key(r, d, encrypt);
}

/* The per-record nonce (§5.3): the IV XOR the sequence number, big-endian, left-padded. */
static void nonce_for(const direction *d, unsigned char nonce[IV_LENGTH]) {
    memcpy(nonce, d->iv, IV_LENGTH);
    for (int i = 0; i < 8; i++) nonce[IV_LENGTH - 1 - i] ^= (unsigned char)(d->sequence >> (8 * i));
}

/* Counts the records in the last `count` bytes of `io`'s queue: all application_data (what a
 * TLS 1.3 server writes under its traffic keys), whole; -1 when they are not. */
static long records_in_tail(const relayd_stream_io *io, size_t count) {
    if (count == 0) return 0;
    if (count > relayd_stream_io_pending(io)) return -1;
    const unsigned char *bytes = io->output + io->output_end - count;
    long records = 0;
    size_t at = 0;
    while (at < count) {
        if (count - at < RECORD_HEADER || bytes[at] != CT_APPLICATION_DATA || bytes[at + 1] != 3 || bytes[at + 2] != 3)
            return -1;
        size_t length = (size_t)bytes[at + 3] << 8 | bytes[at + 4];
        if (length > count - at - RECORD_HEADER) return -1;
        at += RECORD_HEADER + length;
        records += 1;
    }
    return records;
}

/* The secrets captured for `ssl`, taken from it (the caller wipes and frees them). */
static captured_secrets *take_secrets(SSL *ssl) {
    if (secrets_index < 0) return NULL;
    captured_secrets *secrets = SSL_get_ex_data(ssl, secrets_index);
    if (secrets != NULL) SSL_set_ex_data(ssl, secrets_index, NULL);
    return secrets;
}

static relayd_tls_records *records_new(SSL *ssl, const captured_secrets *secrets, const relayd_stream_io *io,
                                       size_t written);
static int records_suite(uint16_t code, const EVP_CIPHER **cipher, const EVP_MD **md, size_t *secret_length);

relayd_tls_records *relayd_tls_records_new(SSL *ssl, const relayd_stream_io *io, size_t written) {
    captured_secrets *secrets = take_secrets(ssl);
    relayd_tls_records *r = records_new(ssl, secrets, io, written);
    if (secrets != NULL) {
        OPENSSL_cleanse(secrets, sizeof(*secrets));
        free(secrets);
    }
    return r;
}

static relayd_tls_records *records_new(SSL *ssl, const captured_secrets *secrets, const relayd_stream_io *io,
                                       size_t written) {
    if (SSL_version(ssl) != TLS1_3_VERSION || SSL_has_pending(ssl)) return NULL;
    const SSL_CIPHER *suite = SSL_get_current_cipher(ssl);
    if (secrets == NULL || suite == NULL) return NULL;
    uint16_t code = (uint16_t)(SSL_CIPHER_get_id(suite) & 0xFFFF);
    size_t secret_length = 0;
    if (records_suite(code, NULL, NULL, &secret_length) != 0) return NULL;
    if (secrets->client_length != secret_length || secrets->server_length != secret_length) return NULL;
    long sent = records_in_tail(io, written);
    if (sent < 0) return NULL;
    int server = SSL_is_server(ssl);
    relayd_tls_records *r = relayd_tls_records_keyed(code, server, server ? secrets->client : secrets->server,
                                                     server ? secrets->server : secrets->client, secret_length);
    if (r == NULL) return NULL;
    r->write.sequence = (uint64_t)sent;
    return r;
}

/* The AEAD and hash of suite `code` (RFC 8446 §B.4) and its secrets' length; -1 for another. */
static int records_suite(uint16_t code, const EVP_CIPHER **cipher, const EVP_MD **md, size_t *secret_length) {
    const EVP_CIPHER *c;
    const EVP_MD *m;
    switch (code) {
    case 0x1301: c = EVP_aes_128_gcm(), m = EVP_sha256(); break;       /* TLS_AES_128_GCM_SHA256 */
    case 0x1302: c = EVP_aes_256_gcm(), m = EVP_sha384(); break;       /* TLS_AES_256_GCM_SHA384 */
    case 0x1303: c = EVP_chacha20_poly1305(), m = EVP_sha256(); break; /* TLS_CHACHA20_POLY1305_SHA256 */
    default: return -1;
    }
    if (c == NULL || m == NULL) return -1;
    if (cipher != NULL) *cipher = c;
    if (md != NULL) *md = m;
    *secret_length = (size_t)EVP_MD_get_size(m);
    return 0;
}

relayd_tls_records *relayd_tls_records_keyed(uint16_t code, int server, const unsigned char *read_secret,
                                             const unsigned char *write_secret, size_t secret_length) {
    const EVP_CIPHER *cipher;
    const EVP_MD *md;
    size_t suite_secret_length;
    if (records_suite(code, &cipher, &md, &suite_secret_length) != 0 || suite_secret_length != secret_length ||
        secret_length > MAX_SECRET)
        return NULL;
    relayd_tls_records *r = calloc(1, sizeof(*r));
    if (r == NULL) return NULL;
    r->suite = code;
    r->cipher = cipher;
    r->md = md;
    r->key_length = (size_t)EVP_CIPHER_get_key_length(cipher);
    r->secret_length = secret_length;
    r->server = server;
    memcpy(r->read.secret, read_secret, secret_length);
    memcpy(r->write.secret, write_secret, secret_length);
    r->read.aead = EVP_CIPHER_CTX_new();
    r->write.aead = EVP_CIPHER_CTX_new();
    if (r->read.aead == NULL || r->write.aead == NULL || r->key_length > 32 || direction_key(r, &r->read, 0) != 0 ||
        direction_key(r, &r->write, 1) != 0) {
        relayd_tls_records_free(r);
        return NULL;
    }
    return r;
}

void relayd_tls_records_free(relayd_tls_records *r) {
    if (r == NULL) return;
    EVP_CIPHER_CTX_free(r->read.aead);
    EVP_CIPHER_CTX_free(r->write.aead);
    free(r->pending);
    OPENSSL_cleanse(r, sizeof(*r));
    free(r);
}

void relayd_tls_records_sequences(const relayd_tls_records *r, uint64_t *read, uint64_t *write) {
    *read = r->read.sequence;
    *write = r->write.sequence;
}

void relayd_tls_records_set_sequences(relayd_tls_records *r, uint64_t read, uint64_t write) {
    r->read.sequence = read;
    r->write.sequence = write;
}

int relayd_tls_records_release_buffers(relayd_tls_records *r) {
    if (r->pending_count > 0 || r->pending == NULL) return 0;
    free(r->pending);
    r->pending = NULL;
    return 1;
}

const char *relayd_tls_records_failure(const relayd_tls_records *r) { return r->failure ? r->failure : "TLS record error"; }

/* ---- writing (§5.2) ---- */

/* One record of `count` <= 2^14 bytes of `type` appended to the queue. */
static int seal_one(relayd_tls_records *r, relayd_stream_io *io, const unsigned char *bytes, size_t count,
                    unsigned char type) {
    size_t length = count + 1 + TAG_LENGTH;
    unsigned char *record = relayd_stream_io_reserve(io, RECORD_HEADER + length);
    if (record == NULL) return -1;
    record[0] = CT_APPLICATION_DATA;
    record[1] = 3;
    record[2] = 3;
    record[3] = (unsigned char)(length >> 8);
    record[4] = (unsigned char)length;
    unsigned char nonce[IV_LENGTH];
    nonce_for(&r->write, nonce);
    EVP_CIPHER_CTX *aead = r->write.aead;
    unsigned char *out = record + RECORD_HEADER;
    int n = 0, total = 0;
    if (EVP_EncryptInit_ex(aead, NULL, NULL, NULL, nonce) != 1) return -1;
    if (EVP_EncryptUpdate(aead, NULL, &n, record, RECORD_HEADER) != 1) return -1;
    if (count > 0) {
        if (EVP_EncryptUpdate(aead, out, &n, bytes, (int)count) != 1) return -1;
        total += n;
    }
    if (EVP_EncryptUpdate(aead, out + total, &n, &type, 1) != 1) return -1;
    total += n;
    if (EVP_EncryptFinal_ex(aead, out + total, &n) != 1) return -1;
    total += n;
    if ((size_t)total != count + 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(aead, EVP_CTRL_AEAD_GET_TAG, TAG_LENGTH, out + total) != 1) return -1;
    relayd_stream_io_commit(io, RECORD_HEADER + length);
    r->write.sequence += 1;
    return 0;
}

/* §5.5: no more than 2^24.5 full-size records under one AES-GCM key. Before the write side's
 * sequence reaches 2^24 relayd moves its key on with a KeyUpdate (not asking the peer to). */
#define KEY_UPDATE_AFTER (1ULL << 24)

static int update_write_key(relayd_tls_records *r, relayd_stream_io *io) {
    static const unsigned char update[5] = {HS_KEY_UPDATE, 0, 0, 1, 0};
    if (r->closed) return -1;
    if (seal_one(r, io, update, sizeof(update), CT_HANDSHAKE) != 0) return -1;
    return direction_update(r, &r->write, 1);
}

int relayd_tls_records_seal(relayd_tls_records *r, relayd_stream_io *io, const void *bytes, size_t count) {
    const unsigned char *at = bytes;
    if (r->closed) return -1;
    if (r->write.sequence >= KEY_UPDATE_AFTER && update_write_key(r, io) != 0) {
        r->failure = "cannot update the write key";
        return -1;
    }
    do {
        size_t chunk = count < MAX_PLAINTEXT ? count : MAX_PLAINTEXT;
        if (seal_one(r, io, at, chunk, CT_APPLICATION_DATA) != 0) {
            r->failure = "cannot seal a TLS record";
            return -1;
        }
        at += chunk;
        count -= chunk;
    } while (count > 0);
    return 0;
}

/* An alert (§6): close_notify is a warning, every other one is fatal and ends the writing. */
static int send_alert(relayd_tls_records *r, relayd_stream_io *io, unsigned char description) {
    if (r->closed) return -1;
    unsigned char alert[2] = {description == ALERT_CLOSE_NOTIFY ? 1 : 2, description};
    int result = seal_one(r, io, alert, sizeof(alert), CT_ALERT);
    r->closed = 1;
    return result;
}

int relayd_tls_records_close_notify(relayd_tls_records *r, relayd_stream_io *io) {
    return send_alert(r, io, ALERT_CLOSE_NOTIFY);
}

/* ---- reading (§5.2) ---- */

/* A fatal error: the alert goes out, the reason is kept. */
static long fail(relayd_tls_records *r, relayd_stream_io *io, unsigned char alert, const char *why) {
    r->failure = why;
    send_alert(r, io, alert);
    return RELAYD_TLS_RECORDS_FAILED;
}

/* Opens the record `record` (header included) into `out`; the inner plaintext's length (content,
 * type, padding) is at most `length` - 5 - 16, which the caller checked fits. Returns the
 * content's length with its type in `*type`; -1 when it does not authenticate, -2 when its
 * plaintext is all zeros (no type, §5.4). */
static long open_one(relayd_tls_records *r, const unsigned char *record, size_t length, unsigned char *out,
                     unsigned char *type) {
    size_t sealed = length - RECORD_HEADER - TAG_LENGTH;
    unsigned char nonce[IV_LENGTH];
    nonce_for(&r->read, nonce);
    EVP_CIPHER_CTX *aead = r->read.aead;
    int n = 0, total = 0;
    if (EVP_DecryptInit_ex(aead, NULL, NULL, NULL, nonce) != 1) return -1;
    if (EVP_DecryptUpdate(aead, NULL, &n, record, RECORD_HEADER) != 1) return -1;
    if (sealed > 0) {
        if (EVP_DecryptUpdate(aead, out, &n, record + RECORD_HEADER, (int)sealed) != 1) return -1;
        total = n;
    }
    if (EVP_CIPHER_CTX_ctrl(aead, EVP_CTRL_AEAD_SET_TAG, TAG_LENGTH, (void *)(record + length - TAG_LENGTH)) != 1)
        return -1;
    if (EVP_DecryptFinal_ex(aead, out + total, &n) != 1) return -1;
    total += n;
    r->read.sequence += 1;
    /* §5.4: the type is the last non-zero byte; all zeros is an error. */
    while (total > 0 && out[total - 1] == 0) total -= 1;
    if (total == 0) return -2;
    *type = out[total - 1];
    return total - 1;
}

/* The handshake messages of one record after the handshake. KeyUpdate (§4.6.3): the peer's key
 * moves on, and when it asks, ours does too after a KeyUpdate of our own (not requesting) under
 * the old key; it must end its record (§5.1: no message spans a key change). A client skips
 * the server's NewSessionTickets (it resumes through OpenSSL's sessions, not these). Anything
 * else is unexpected: relayd asks for no client certificate. Messages cut across records are
 * refused. -1 when all went well, else the alert to send. */
static int handshake_record(relayd_tls_records *r, relayd_stream_io *io, const unsigned char *body, size_t length) {
    size_t at = 0;
    while (at < length) {
        if (length - at < 4) {
            r->failure = "a handshake message cut across records";
            return ALERT_DECODE_ERROR;
        }
        unsigned char type = body[at];
        size_t size = (size_t)body[at + 1] << 16 | (size_t)body[at + 2] << 8 | body[at + 3];
        if (size > length - at - 4) {
            r->failure = "a handshake message cut across records";
            return ALERT_DECODE_ERROR;
        }
        const unsigned char *message = body + at + 4;
        at += 4 + size;
        if (type == HS_NEW_SESSION_TICKET && !r->server) continue;
        if (type != HS_KEY_UPDATE) {
            r->failure = "unexpected handshake message";
            return ALERT_UNEXPECTED_MESSAGE;
        }
        if (size != 1) {
            r->failure = "malformed KeyUpdate";
            return ALERT_DECODE_ERROR;
        }
        if (message[0] > 1) {
            r->failure = "a KeyUpdate with an unknown request_update";
            return ALERT_ILLEGAL_PARAMETER;
        }
        if (at != length) {
            r->failure = "a KeyUpdate not at the end of its record";
            return ALERT_UNEXPECTED_MESSAGE;
        }
        if (direction_update(r, &r->read, 0) != 0) {
            r->failure = "cannot update the read key";
            return ALERT_INTERNAL_ERROR;
        }
        if (message[0] == 1 && update_write_key(r, io) != 0) {
            r->failure = "cannot update the write key";
            return ALERT_INTERNAL_ERROR;
        }
    }
    return -1;
}

/* A record header (§5.1, §5.2): after the handshake every record is protected (outer type
 * application_data; a change_cipher_spec is unexpected now, §5), and its ciphertext holds at
 * least the inner type and the tag and at most 2^14 + 256 bytes. legacy_record_version is
 * ignored. 0 when it is one; else the alert is queued. */
static int check_header(relayd_tls_records *r, relayd_stream_io *io, const unsigned char *header) {
    size_t length = (size_t)header[3] << 8 | header[4];
    if (header[0] != CT_APPLICATION_DATA) {
        fail(r, io, ALERT_UNEXPECTED_MESSAGE, "a record not protected after the handshake");
        return -1;
    }
    if (length > MAX_CIPHERTEXT) {
        fail(r, io, ALERT_RECORD_OVERFLOW, "a record longer than TLS 1.3 allows");
        return -1;
    }
    if (length < TAG_LENGTH + 1) {
        fail(r, io, ALERT_BAD_RECORD_MAC, "a record too short to authenticate");
        return -1;
    }
    return 0;
}

/* The record's content, opened into `out`: application data's length, 0 for a record that
 * carried none (a KeyUpdate, user_canceled, an empty record), or a RELAYD_TLS_RECORDS_ code. */
static long process(relayd_tls_records *r, relayd_stream_io *io, const unsigned char *record, size_t length,
                    unsigned char *out) {
    unsigned char type = 0;
    long content = open_one(r, record, length, out, &type);
    if (content == -1) return fail(r, io, ALERT_BAD_RECORD_MAC, "a record that does not authenticate");
    if (content < 0) return fail(r, io, ALERT_UNEXPECTED_MESSAGE, "a record without a content type");
    /* §5.4: at most 2^14 bytes of content; §5.1: no empty handshake or alert record. */
    if (content > MAX_PLAINTEXT) return fail(r, io, ALERT_RECORD_OVERFLOW, "a record with more than 2^14 bytes");
    if (content == 0 && type != CT_APPLICATION_DATA)
        return fail(r, io, ALERT_UNEXPECTED_MESSAGE, "an empty handshake or alert record");
    switch (type) {
    case CT_APPLICATION_DATA:
        return content;
    case CT_HANDSHAKE: {
        int alert = handshake_record(r, io, out, (size_t)content);
        return alert < 0 ? 0 : fail(r, io, (unsigned char)alert, r->failure);
    }
    case CT_ALERT:
        if (content != 2) return fail(r, io, ALERT_DECODE_ERROR, "malformed alert");
        if (out[1] == ALERT_CLOSE_NOTIFY) return RELAYD_TLS_RECORDS_CLOSED;
        if (out[1] == ALERT_USER_CANCELED) return 0;
        r->failure = "the peer sent a fatal alert";
        r->closed = 1;
        return RELAYD_TLS_RECORDS_FAILED;
    default:
        return fail(r, io, ALERT_UNEXPECTED_MESSAGE, "a record of an unknown content type");
    }
}

long relayd_tls_records_open(relayd_tls_records *r, relayd_stream_io *io, unsigned char *out, size_t capacity) {
    if (capacity < MAX_CIPHERTEXT) return RELAYD_TLS_RECORDS_NEEDS_ROOM;
    for (;;) {
        /* The header: from the part kept, or straight from the input. */
        if (r->header_count < RECORD_HEADER) {
            size_t want = RECORD_HEADER - r->header_count;
            if (r->header_count == 0 && io->input_length >= RECORD_HEADER) {
                const unsigned char *record = io->input;
                size_t length = (size_t)record[3] << 8 | record[4];
                if (check_header(r, io, record) != 0) return RELAYD_TLS_RECORDS_FAILED;
                if (io->input_length >= RECORD_HEADER + length) {
                    /* The whole record is in the input: opened where it lies. */
                    io->input += RECORD_HEADER + length;
                    io->input_length -= RECORD_HEADER + length;
                    long result = process(r, io, record, RECORD_HEADER + length, out);
                    if (result == 0) continue;
                    return result;
                }
            }
            size_t take = io->input_length < want ? io->input_length : want;
            memcpy(r->header + r->header_count, io->input, take);
            r->header_count += take;
            io->input += take;
            io->input_length -= take;
            if (r->header_count < RECORD_HEADER) return 0;
            if (check_header(r, io, r->header) != 0) return RELAYD_TLS_RECORDS_FAILED;
            if (r->pending == NULL) {
                r->pending = malloc(RECORD_HEADER + MAX_CIPHERTEXT);
                if (r->pending == NULL) {
                    r->failure = "no memory for a TLS record";
                    return RELAYD_TLS_RECORDS_FAILED;
                }
            }
            memcpy(r->pending, r->header, RECORD_HEADER);
            r->pending_count = RECORD_HEADER;
        }
        /* The rest of a record cut off by the end of a read. */
        size_t whole = RECORD_HEADER + ((size_t)r->header[3] << 8 | r->header[4]);
        size_t take = whole - r->pending_count;
        if (io->input_length < take) take = io->input_length;
        memcpy(r->pending + r->pending_count, io->input, take);
        r->pending_count += take;
        io->input += take;
        io->input_length -= take;
        if (r->pending_count < whole) return 0;
        r->pending_count = 0;
        r->header_count = 0;
        long result = process(r, io, r->pending, whole, out);
        if (result == 0) continue;
        return result;
    }
}
