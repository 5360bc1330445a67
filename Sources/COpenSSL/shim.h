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
#endif
