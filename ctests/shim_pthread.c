// LD_PRELOAD shim for the fault tests: pthread_create fails with EAGAIN for the first
// GC_SHIM_PTHREAD_FAIL_FIRST calls, and whenever GC_SHIM_PTHREAD_CAP threads made through
// it are alive (a thread counts until it exits). Unset: no failures, no cap. Prints
// nothing; a test reads /proc/self/status or its own counters.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_int shim_calls;
static atomic_int shim_alive;
static int shim_fail_first;
static int shim_cap = -1;
static pthread_key_t shim_key;
static pthread_once_t shim_once = PTHREAD_ONCE_INIT;
static int (*shim_real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static void shim_thread_exited(void *unused) {
    (void)unused;
    atomic_fetch_sub(&shim_alive, 1);
}

static void shim_init(void) {
    pthread_key_create(&shim_key, shim_thread_exited);
    const char *fail = getenv("GC_SHIM_PTHREAD_FAIL_FIRST");
    const char *cap = getenv("GC_SHIM_PTHREAD_CAP");
    if (fail) shim_fail_first = atoi(fail);
    if (cap) shim_cap = atoi(cap);
    shim_real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
}

struct shim_start {
    void *(*body)(void *);
    void *argument;
};

static void *shim_trampoline(void *raw) {
    struct shim_start start = *(struct shim_start *)raw;
    free(raw);
    pthread_setspecific(shim_key, (void *)1);  // the destructor counts the exit
    return start.body(start.argument);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*body)(void *), void *argument) {
    pthread_once(&shim_once, shim_init);
    if (atomic_fetch_add(&shim_calls, 1) < shim_fail_first) return EAGAIN;
    int alive = atomic_fetch_add(&shim_alive, 1);
    if (shim_cap >= 0 && alive >= shim_cap) {
        atomic_fetch_sub(&shim_alive, 1);
        return EAGAIN;
    }
    struct shim_start *start = malloc(sizeof *start);
    if (!start) {
        atomic_fetch_sub(&shim_alive, 1);
        return EAGAIN;
    }
    start->body = body;
    start->argument = argument;
    int rc = shim_real(thread, attr, shim_trampoline, start);
    if (rc != 0) {
        free(start);
        atomic_fetch_sub(&shim_alive, 1);
    }
    return rc;
}
