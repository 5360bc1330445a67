#ifndef RELAYD_COPENSSL_SHIM_H
#define RELAYD_COPENSSL_SHIM_H
/* The low-level digest contexts (SHA_CTX, SHA256_CTX, MD5_CTX) live on the stack:
   no heap allocation per digest. OpenSSL 3 marks them deprecated; they remain supported. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <openssl/md5.h>
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/pem.h>

/* SSL_OP_* are built with a function-like macro (SSL_OP_BIT) that Swift cannot import. */
static const uint64_t RELAYD_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t RELAYD_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t RELAYD_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t RELAYD_SSL_OP_IGNORE_UNEXPECTED_EOF = SSL_OP_IGNORE_UNEXPECTED_EOF;
#endif
