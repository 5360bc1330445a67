#ifndef RELAYD_CMALLOCCOUNTER_H
#define RELAYD_CMALLOCCOUNTER_H

#include <stdint.h>

/* Heap allocation counting for benchmarks. Linking this target replaces malloc, calloc, realloc,
   free, posix_memalign and aligned_alloc for the whole process with wrappers that count each call
   (all threads, relaxed atomics) and forward to glibc's __libc_* allocator. Only stun-bench
   links it: never link it into relayd or a test binary. */

/** Calls to malloc, calloc, realloc, posix_memalign and aligned_alloc since the last reset. */
uint64_t relayd_malloc_count(void);

/** Calls to free with a non-null pointer since the last reset. */
uint64_t relayd_free_count(void);

/** Sets both counters to zero. */
void relayd_malloc_reset(void);

#endif
