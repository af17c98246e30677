// LD_PRELOAD shim for the fault tests: makes malloc, calloc and posix_memalign fail, but only calls made
// directly from the dispatch library's own code (the return address lies in the mapping
// of a file whose name contains GC_SHIM_MALLOC_IMAGE, default "libgrandcentral";
// "libdispatch" for the reference), so that the C library and the Swift runtime keep working and the failure
// lands where the library can see it. Inert until the test arms it through
// gc_shim_malloc_arm(nth, persistent) (found with dlsym): the nth such call from then on
// fails, and with `persistent` every later one as well. Calls are counted in
// gc_shim_malloc_failures().
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic uintptr_t shim_low, shim_high;
static atomic_long shim_countdown;  // > 0: armed; the call that takes it to 0 fails
static atomic_bool shim_persistent, shim_armed;
static atomic_long shim_failures;

void gc_shim_malloc_arm(long nth, int persistent) {
    const char *image = getenv("GC_SHIM_MALLOC_IMAGE");
    if (!image) image = "libgrandcentral";
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[512];
    uintptr_t low = UINTPTR_MAX, high = 0;
    while (fgets(line, sizeof line, maps)) {
        if (!strstr(line, image)) continue;
        unsigned long start, end;
        if (sscanf(line, "%lx-%lx", &start, &end) != 2) continue;
        if (start < low) low = start;
        if (end > high) high = end;
    }
    fclose(maps);
    atomic_store(&shim_low, low);
    atomic_store(&shim_high, high);
    atomic_store(&shim_persistent, persistent != 0);
    atomic_store(&shim_countdown, nth);
    atomic_store(&shim_armed, true);
}

long gc_shim_malloc_failures(void) { return atomic_load(&shim_failures); }

/// Whether a call from `caller` fails (and is counted as failed).
static bool shim_fails(uintptr_t caller) {
    if (!atomic_load_explicit(&shim_armed, memory_order_relaxed)) return false;
    if (caller < atomic_load(&shim_low) || caller >= atomic_load(&shim_high)) return false;
    bool fail = atomic_fetch_sub(&shim_countdown, 1) == 1
                || (atomic_load(&shim_persistent) && atomic_load(&shim_countdown) <= 0);
    if (!fail) return false;
    atomic_fetch_add(&shim_failures, 1);
    errno = ENOMEM;
    return true;
}

void *malloc(size_t size) {
    if (shim_fails((uintptr_t)__builtin_return_address(0))) return NULL;
    return __libc_malloc(size);
}

// libdispatch allocates with calloc.
void *calloc(size_t count, size_t size) {
    if (shim_fails((uintptr_t)__builtin_return_address(0))) return NULL;
    return __libc_calloc(count, size);
}

// GrandCentral's work-item slabs are page-aligned (gc_continuation_slab_new).
int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    if (shim_fails((uintptr_t)__builtin_return_address(0))) return ENOMEM;
    void *p = __libc_memalign(alignment, size);
    if (p == NULL && size != 0) return ENOMEM;
    *out = p;
    return 0;
}
