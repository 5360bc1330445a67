/* The state of `relayd_tls_records` (tls_records.c), shared with the file that moves it to
 * another process (tls_records_state.c); see CStreamIO.h and docs/tls.md. Not a public header. */
#ifndef RELAYD_TLS_RECORDS_INTERNAL_H
#define RELAYD_TLS_RECORDS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "CStreamIO.h"

/* RFC 8446 §5.1, §5.2. */
#define RECORD_HEADER 5
#define MAX_PLAINTEXT 16384
#define MAX_CIPHERTEXT (MAX_PLAINTEXT + 256)
#define TAG_LENGTH 16
#define IV_LENGTH 12
#define MAX_SECRET 48

enum { CT_ALERT = 21, CT_HANDSHAKE = 22, CT_APPLICATION_DATA = 23 };

/* One direction's record protection. */
typedef struct {
    EVP_CIPHER_CTX *aead;
    unsigned char iv[IV_LENGTH];
    unsigned char secret[MAX_SECRET];
    uint64_t sequence;
} direction;

struct relayd_tls_records {
    /* The server's side (reads the client's records); 0 for a client's. */
    int server;
    /* The cipher suite's code point (RFC 8446 §B.4). */
    uint16_t suite;
    const EVP_CIPHER *cipher;
    const EVP_MD *md;
    size_t key_length;
    size_t secret_length;
    direction read;
    direction write;
    /* A record cut off by the end of a read: its bytes so far (room for the longest record,
     * allocated when one is first cut off, freed when the connection idles). */
    unsigned char *pending;
    size_t pending_count;
    unsigned char header[RECORD_HEADER];
    size_t header_count;
    /* Why the last call failed; a static string. */
    const char *failure;
    int closed;
};

/* Records of suite `code` (RFC 8446 §B.4) keyed from the two traffic secrets of
 * `secret_length` bytes each; both sequences at 0. NULL for another suite, secrets of another
 * length than the suite's hash (nothing is read then), or without memory. */
relayd_tls_records *relayd_tls_records_keyed(uint16_t code, int server, const unsigned char *read_secret,
                                             const unsigned char *write_secret, size_t secret_length);

#endif
