#ifndef RELAYD_CCRYPTO_SHIM_H
#define RELAYD_CCRYPTO_SHIM_H
/* libcrypto alone, for the codec: its digests (SHA-1, SHA-256, MD5) and AES-256-GCM sealed
   boxes. No TLS here (libssl is COpenSSL's).
   The low-level digest contexts (SHA_CTX, SHA256_CTX, MD5_CTX) live on the stack: no heap
   allocation per digest. OpenSSL 3 marks them deprecated; they remain supported. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <openssl/md5.h>
#include <openssl/evp.h>
#endif
