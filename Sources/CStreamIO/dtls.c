// DTLS helpers for relayd's DTLS listener (docs/dtls.md): the stateless cookie of the
// HelloVerifyRequest exchange (RFC 6347 §4.2.1), DTLSv1_listen with the client's address as a
// sockaddr, and a datagram BIO on a socket.
#include "CStreamIO.h"

#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

static unsigned char cookie_secret[32];

// Seconds a cookie is made for; one from the period before is still accepted (RFC 6347
// §4.2.1: the secret changes, and cookies made under the previous one stay good for a while).
#define COOKIE_PERIOD 60

// HMAC-SHA-256 under the process's secret over the client's address, port and the period: nobody
// can make one for an address they do not receive at, and one seen on the wire is good for two
// periods at most.
static int cookie_for(SSL *ssl, uint64_t period, unsigned char *out, unsigned int *out_length) {
    BIO_ADDR *peer = BIO_ADDR_new();
    if (peer == NULL) return 0;
    int ok = 0;
    unsigned char material[16 + 2 + 8];
    size_t length = 16;
    if (BIO_dgram_get_peer(SSL_get_rbio(ssl), peer) > 0 && BIO_ADDR_rawaddress(peer, material, &length) == 1
        && length <= 16) {
        unsigned short port = BIO_ADDR_rawport(peer);
        memcpy(material + length, &port, 2);
        memcpy(material + length + 2, &period, 8);
        ok = HMAC(EVP_sha256(), cookie_secret, sizeof cookie_secret, material, length + 10, out, out_length) != NULL;
    }
    BIO_ADDR_free(peer);
    return ok;
}

static uint64_t current_period(void) { return (uint64_t)time(NULL) / COOKIE_PERIOD; }

static int generate_cookie(SSL *ssl, unsigned char *cookie, unsigned int *length) {
    return cookie_for(ssl, current_period(), cookie, length);
}

static int verify_cookie(SSL *ssl, const unsigned char *cookie, unsigned int length) {
    uint64_t now = current_period();
    for (uint64_t period = now - 1; period <= now; period++) {
        unsigned char expected[EVP_MAX_MD_SIZE];
        unsigned int expected_length = 0;
        if (cookie_for(ssl, period, expected, &expected_length) && expected_length == length
            && CRYPTO_memcmp(expected, cookie, length) == 0) {
            return 1;
        }
    }
    return 0;
}

// Set once, before the first DTLS context: drawn at random, or taken from the relayd that
// handed this process its sockets (docs/live-upgrade.md), so a cookie it sent stays good.
static int secret_ready = 0;

int relayd_dtls_set_cookie_secret(const unsigned char *secret, size_t length) {
    if (secret_ready || length != sizeof cookie_secret) return -1;
    memcpy(cookie_secret, secret, sizeof cookie_secret);
    secret_ready = 1;
    return 0;
}

int relayd_dtls_cookie_secret(unsigned char *out, size_t length) {
    if (!secret_ready || length != sizeof cookie_secret) return -1;
    memcpy(out, cookie_secret, sizeof cookie_secret);
    return 0;
}

int relayd_dtls_configure(SSL_CTX *ctx) {
    if (!secret_ready) {
        if (RAND_bytes(cookie_secret, sizeof cookie_secret) != 1) return -1;
        secret_ready = 1;
    }
    SSL_CTX_set_cookie_generate_cb(ctx, generate_cookie);
    SSL_CTX_set_cookie_verify_cb(ctx, verify_cookie);
    return 0;
}

int relayd_dtls_listen(SSL *ssl, void *storage) {
    struct sockaddr_storage *client = storage;
    BIO_ADDR *peer = BIO_ADDR_new();
    if (peer == NULL) return -1;
    int result = DTLSv1_listen(ssl, peer);
    if (result == 1) {
        memset(client, 0, sizeof *client);
        size_t length = 16;
        unsigned char raw[16];
        if (BIO_ADDR_rawaddress(peer, raw, &length) != 1) {
            result = -1;
        } else if (BIO_ADDR_family(peer) == AF_INET && length == 4) {
            struct sockaddr_in *sin = (struct sockaddr_in *)client;
            sin->sin_family = AF_INET;
            sin->sin_port = BIO_ADDR_rawport(peer);
            memcpy(&sin->sin_addr, raw, 4);
        } else if (BIO_ADDR_family(peer) == AF_INET6 && length == 16) {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)client;
            sin6->sin6_family = AF_INET6;
            sin6->sin6_port = BIO_ADDR_rawport(peer);
            memcpy(&sin6->sin6_addr, raw, 16);
        } else {
            result = -1;
        }
    }
    BIO_ADDR_free(peer);
    return result;
}

int relayd_dtls_use_socket(SSL *ssl, int fd, const void *storage) {
    const struct sockaddr_storage *peer = storage;
    BIO *bio = BIO_new_dgram(fd, BIO_NOCLOSE);
    if (bio == NULL) return -1;
    if (peer != NULL) {
        BIO_ADDR *address = BIO_ADDR_new();
        int made = 0;
        if (address != NULL) {
            if (peer->ss_family == AF_INET) {
                const struct sockaddr_in *sin = (const struct sockaddr_in *)peer;
                made = BIO_ADDR_rawmake(address, AF_INET, &sin->sin_addr, 4, sin->sin_port);
            } else if (peer->ss_family == AF_INET6) {
                const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)peer;
                made = BIO_ADDR_rawmake(address, AF_INET6, &sin6->sin6_addr, 16, sin6->sin6_port);
            }
            if (made) BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_CONNECTED, 0, address);
            BIO_ADDR_free(address);
        }
        if (!made) {
            BIO_free(bio);
            return -1;
        }
    }
    SSL_set_bio(ssl, bio, bio);
    return 0;
}
