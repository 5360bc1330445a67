/* libFuzzer target for the TLS session state a live upgrade hands over
 * (Sources/CStreamIO/tls_records_state.c, docs/live-upgrade.md, "TLS clients"): any bytes are
 * either refused or imported, and an imported state exports back to exactly the same bytes.
 * Built by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "CStreamIO.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A copy of exactly `size` bytes, so AddressSanitizer sees any read past them. */
    unsigned char *state = malloc(size ? size : 1);
    if (state == NULL) return 0;
    if (size) memcpy(state, data, size);
    relayd_tls_records *records = relayd_tls_records_import(state, size);
    if (records != NULL) {
        static unsigned char out[RELAYD_TLS_RECORDS_STATE_MAX];
        long length = relayd_tls_records_export(records, out, sizeof out);
        if (length != (long)size || memcmp(out, state, size) != 0) abort();
        relayd_tls_records_free(records);
    }
    free(state);
    return 0;
}
