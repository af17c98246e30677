// Process-wide thread facts for fork (GrandCentral/Runtime/Fork.swift): whether the library
// has started a thread, whether this process is the child of a fork taken while it had,
// and whether starting one is prohibited. gc_thread_create (platform.c) reports each start
// here, so the facts cannot miss a thread.
//
// The pthread_atfork child handler runs in the child's only thread, before fork() returns.
// It must not block (the parent's threads, and whatever locks they held, are gone): it
// stores to atomics and calls the engine's hook (GrandCentral/Runtime/Fork.swift), which
// only stores and closes descriptors.
#include "CGrandCentral.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_int gc_multithreaded;
static atomic_int gc_fork_child_of_multithreaded;
static atomic_int gc_multithreaded_prohibited;
static pthread_once_t gc_atfork_once = PTHREAD_ONCE_INIT;
static void (*_Atomic gc_fork_child_hook)(void);

static void gc_atfork_child(void) {
    if (atomic_load(&gc_multithreaded)) {
        atomic_store(&gc_fork_child_of_multithreaded, 1);
        atomic_store(&gc_multithreaded, 0);   // the child has one thread until it starts more
        void (*hook)(void) = atomic_load(&gc_fork_child_hook);
        if (hook) hook();
    }
    atomic_store(&gc_multithreaded_prohibited, 0);   // not inherited, as in libdispatch
}

static void gc_atfork_register(void) { pthread_atfork(NULL, NULL, gc_atfork_child); }

void gc_fork_set_child_hook(void (*hook)(void)) {
    atomic_store(&gc_fork_child_hook, hook);
    pthread_once(&gc_atfork_once, gc_atfork_register);
}

void gc_fork_child_now(void) { gc_atfork_child(); }

void gc_note_thread_start(void) {
    if (atomic_load(&gc_multithreaded_prohibited)) {
        gc_client_bug("_dispatch_prohibit_transition_to_multithreaded",
                "dispatch would start a thread while that is prohibited");
    }
    pthread_once(&gc_atfork_once, gc_atfork_register);
    atomic_store(&gc_multithreaded, 1);
}

bool gc_is_multithreaded(void) { return atomic_load(&gc_multithreaded) != 0; }
bool gc_is_fork_child_of_multithreaded(void) { return atomic_load(&gc_fork_child_of_multithreaded) != 0; }

void gc_prohibit_multithreaded(bool prohibit) {
    if (prohibit && atomic_load(&gc_multithreaded)) {
        gc_client_bug("_dispatch_prohibit_transition_to_multithreaded",
                "the process is already multithreaded by dispatch");
    }
    atomic_store(&gc_multithreaded_prohibited, prohibit ? 1 : 0);
}
