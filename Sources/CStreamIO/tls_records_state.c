/* A TLS 1.3 session's record state as bytes, so a live upgrade moves the session to the heir
 * (docs/live-upgrade.md, "TLS clients"; docs/tls.md, "After the handshake"). Per direction the
 * traffic secret and the sequence number are the whole of it (RFC 8446 §5.3, §7.3): the key and
 * the IV are derived again from the secret. A record the client had only partly sent goes with
 * them. The layout, big-endian:
 *
 *   u8 format (1) | u16 suite | u8 secret length L
 *   read secret (L) | u64 read sequence | write secret (L) | u64 write sequence
 *   u16 count C | the C bytes of a record cut off so far (C < 5 + its length)
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "CStreamIO.h"
#include "tls_records_internal.h"

#define STATE_FORMAT 1

_Static_assert(RELAYD_TLS_RECORDS_STATE_MAX == 4 + 2 * (MAX_SECRET + 8) + 2 + RECORD_HEADER + MAX_CIPHERTEXT - 1,
               "RELAYD_TLS_RECORDS_STATE_MAX is the longest state");

static void put_u64(unsigned char *out, uint64_t value) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(value >> (56 - 8 * i));
}

static uint64_t get_u64(const unsigned char *in) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = value << 8 | in[i];
    return value;
}

/* The bytes of a record cut off by the end of a read: the header's part, or the header and
 * the body so far. */
static const unsigned char *cut_bytes(const relayd_tls_records *r, size_t *count) {
    if (r->header_count < RECORD_HEADER) {
        *count = r->header_count;
        return r->header;
    }
    *count = r->pending_count;
    return r->pending;
}

long relayd_tls_records_export(const relayd_tls_records *r, unsigned char *out, size_t capacity) {
    if (!r->server || r->closed || r->failure != NULL) return -1;
    size_t cut_count = 0;
    const unsigned char *cut = cut_bytes(r, &cut_count);
    size_t length = 4 + 2 * (r->secret_length + 8) + 2 + cut_count;
    if (length > capacity || cut_count > 0xFFFF) return -1;
    size_t n = 0;
    out[n++] = STATE_FORMAT;
    out[n++] = (unsigned char)(r->suite >> 8);
    out[n++] = (unsigned char)r->suite;
    out[n++] = (unsigned char)r->secret_length;
    memcpy(out + n, r->read.secret, r->secret_length);
    n += r->secret_length;
    put_u64(out + n, r->read.sequence);
    n += 8;
    memcpy(out + n, r->write.secret, r->secret_length);
    n += r->secret_length;
    put_u64(out + n, r->write.sequence);
    n += 8;
    out[n++] = (unsigned char)(cut_count >> 8);
    out[n++] = (unsigned char)cut_count;
    if (cut_count > 0) memcpy(out + n, cut, cut_count);
    return (long)length;
}

/* Whether `cut` (count bytes) can begin a record after the handshake: a protected record's
 * header (§5.2) whose ciphertext length fits, and fewer bytes than the whole record. */
static int cut_is_valid(const unsigned char *cut, size_t count) {
    if (count == 0) return 1;
    if (cut[0] != CT_APPLICATION_DATA) return 0;
    if (count < RECORD_HEADER) return 1;
    size_t length = (size_t)cut[3] << 8 | cut[4];
    return length >= TAG_LENGTH + 1 && length <= MAX_CIPHERTEXT && count < RECORD_HEADER + length;
}

relayd_tls_records *relayd_tls_records_import(const unsigned char *state, size_t length) {
    if (length < 4 || state[0] != STATE_FORMAT) return NULL;
    uint16_t suite = (uint16_t)(state[1] << 8 | state[2]);
    size_t secret_length = state[3];
    if (secret_length == 0 || secret_length > MAX_SECRET) return NULL;
    size_t fixed = 4 + 2 * (secret_length + 8) + 2;
    if (length < fixed) return NULL;
    const unsigned char *read_secret = state + 4;
    const unsigned char *write_secret = read_secret + secret_length + 8;
    const unsigned char *counted = write_secret + secret_length + 8;
    size_t cut_count = (size_t)counted[0] << 8 | counted[1];
    const unsigned char *cut = counted + 2;
    if (length != fixed + cut_count || !cut_is_valid(cut, cut_count)) return NULL;

    /* Keyed only when the length given is the suite's: the secrets are read at that length. */
    relayd_tls_records *r = relayd_tls_records_keyed(suite, 1, read_secret, write_secret, secret_length);
    if (r == NULL) return NULL;
    r->read.sequence = get_u64(read_secret + secret_length);
    r->write.sequence = get_u64(write_secret + secret_length);
    size_t header = cut_count < RECORD_HEADER ? cut_count : RECORD_HEADER;
    memcpy(r->header, cut, header);
    r->header_count = header;
    if (cut_count >= RECORD_HEADER) {
        r->pending = malloc(RECORD_HEADER + MAX_CIPHERTEXT);
        if (r->pending == NULL) {
            relayd_tls_records_free(r);
            return NULL;
        }
        memcpy(r->pending, cut, cut_count);
        r->pending_count = cut_count;
    }
    return r;
}

void relayd_tls_records_wipe(void *bytes, size_t count) { OPENSSL_cleanse(bytes, count); }
