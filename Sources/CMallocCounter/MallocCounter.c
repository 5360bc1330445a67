#include "CMallocCounter.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

/* glibc's allocator under its internal names: the wrappers below forward to them, so the
   definitions of malloc & co. in this executable interpose the libc ones for every shared
   library too (the Swift runtime's swift_slowAlloc included). */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic uint64_t allocations;
static _Atomic uint64_t frees;

static inline void count_allocation(void) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

uint64_t relayd_malloc_count(void) { return atomic_load_explicit(&allocations, memory_order_relaxed); }

uint64_t relayd_free_count(void) { return atomic_load_explicit(&frees, memory_order_relaxed); }

void relayd_malloc_reset(void) {
    atomic_store_explicit(&allocations, 0, memory_order_relaxed);
    atomic_store_explicit(&frees, 0, memory_order_relaxed);
}

void *malloc(size_t size) {
    count_allocation();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_allocation();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    if (pointer != NULL) atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __libc_free(pointer);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    count_allocation();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_allocation();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return __libc_memalign(alignment, size);
}
