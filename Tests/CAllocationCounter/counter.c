// The counting allocator (see CAllocationCounter.h).
#include "CAllocationCounter.h"

#include <errno.h>
#include <stddef.h>

#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define GC_TEST_SANITIZED 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define GC_TEST_SANITIZED 1
#endif

#ifndef GC_TEST_SANITIZED

// glibc's allocator under its own names.
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

// Each thread's count is its own (no sharing, no atomics); the process-wide count is one
// relaxed atomic, added to only while `process_counting` is set.
static __thread long thread_allocations;
static long process_allocations;
static int process_counting;

static inline void count(void) {
    thread_allocations += 1;
    if (__atomic_load_n(&process_counting, __ATOMIC_RELAXED))
        __atomic_fetch_add(&process_allocations, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t size) { count(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { count(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { count(); return __libc_realloc(p, size); }
void *memalign(size_t alignment, size_t size) { count(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { count(); return __libc_memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count();
    void *p = __libc_memalign(alignment, size);
    if (p == NULL && size != 0) return ENOMEM;
    *out = p;
    return 0;
}

int gc_test_allocations_counted(void) { return 1; }
long gc_test_thread_allocations(void) { return thread_allocations; }
long gc_test_process_allocations(void) { return __atomic_load_n(&process_allocations, __ATOMIC_RELAXED); }
void gc_test_count_process_allocations(int on) { __atomic_store_n(&process_counting, on, __ATOMIC_RELAXED); }

#else

int gc_test_allocations_counted(void) { return 0; }
long gc_test_thread_allocations(void) { return 0; }
long gc_test_process_allocations(void) { return 0; }
void gc_test_count_process_allocations(int on) { (void)on; }

#endif
