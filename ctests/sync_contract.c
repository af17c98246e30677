// The dispatch_sync contract, under load:
//
// 1. Submission order. On a serial queue (and a queue its target chain makes serial), items
//    run in the order their submissions happened, whatever mix of async and sync made
//    them: one thread alternates async(append i) and sync(check that append i ran) a
//    million times, on an idle queue, on a queue another thread keeps busy, and on a
//    queue targeting a busy serial queue; the same with barrier_async/barrier_sync on a
//    concurrent queue that another thread keeps busy with ordinary items.
// 2. The function of dispatch_sync, dispatch_barrier_sync and dispatch_async_and_wait
//    runs on the calling thread (libdispatch lets async_and_wait use the thread serving a
//    busy queue instead; GrandCentral keeps it on the caller, as for dispatch_sync), with the queue held exactly as a worker would hold it:
//    pthread_self() is the caller's, a __thread variable the caller set is visible, a
//    recursive mutex the caller holds can be taken again, and dispatch_assert_queue
//    passes for the queue, its target and the queues the caller was already on — with
//    the queue idle, and with it busy (the caller had to wait for its turn).
// 3. The held-queue stack has no depth limit: 1,000 nested syncs each see their queue,
//    and dispatch_get_specific sees the innermost queue and its target chain.
// 4. The main thread is on the main queue, also inside a sync onto another queue.
// 5. A sync onto a queue the caller already holds, directly or through a cycle of
//    nested syncs, is still diagnosed.
#include "check.h"

// MARK: - 1. Submission order

enum { ORDER_ROUNDS = 1000000, BUSY_OUTSTANDING = 64 };

typedef struct {
    long appended;           // written only by the queue's own items, in order
    long violations;         // likewise (checks run on the queue)
} order_log_t;

static order_log_t order_log;

static void append_item(void *context) {
    long i = (long)(intptr_t)context;
    if (order_log.appended != i) order_log.violations++;
    order_log.appended = i + 1;
}

static void check_item(void *context) {
    long i = (long)(intptr_t)context;
    // Every append submitted before this sync (0 … i) has run.
    if (order_log.appended != i + 1) order_log.violations++;
}

// A thread that keeps a queue busy: ordinary async items, at most BUSY_OUTSTANDING queued.
typedef struct {
    dispatch_queue_t queue;
    atomic_bool stop;
    atomic_long outstanding;
    atomic_long ran;
} busy_t;

static void busy_item(void *context) {
    busy_t *busy = context;
    busy_wait_ns(200);
    atomic_fetch_add(&busy->ran, 1);
    atomic_fetch_sub(&busy->outstanding, 1);
}

static void *busy_thread(void *argument) {
    busy_t *busy = argument;
    while (!atomic_load(&busy->stop)) {
        if (atomic_load(&busy->outstanding) >= BUSY_OUTSTANDING) {
            sched_yield();
            continue;
        }
        atomic_fetch_add(&busy->outstanding, 1);
        dispatch_async_f(busy->queue, busy, busy_item);
    }
    return NULL;
}

static void busy_start(busy_t *busy, pthread_t *thread, dispatch_queue_t queue) {
    busy->queue = queue;
    atomic_init(&busy->stop, false);
    atomic_init(&busy->outstanding, 0);
    atomic_init(&busy->ran, 0);
    CHECK_EQ(pthread_create(thread, NULL, busy_thread, busy), 0);
}

static void busy_stop(busy_t *busy, pthread_t thread) {
    atomic_store(&busy->stop, true);
    pthread_join(thread, NULL);
    // Drain what is left, then the queue is quiet.
    dispatch_barrier_sync_f(busy->queue, NULL, noop_function);
    CHECKF(atomic_load(&busy->ran) > 0, "the busy thread's items never ran");
}

static void alternate(dispatch_queue_t queue, bool barrier, long rounds) {
    order_log.appended = 0;
    order_log.violations = 0;
    for (long i = 0; i < rounds; i++) {
        if (barrier) {
            dispatch_barrier_async_f(queue, (void *)(intptr_t)i, append_item);
            dispatch_barrier_sync_f(queue, (void *)(intptr_t)i, check_item);
        } else {
            dispatch_async_f(queue, (void *)(intptr_t)i, append_item);
            dispatch_sync_f(queue, (void *)(intptr_t)i, check_item);
        }
    }
    dispatch_barrier_sync_f(queue, NULL, noop_function);
    CHECKF(order_log.violations == 0, "%ld of %ld syncs overtook an earlier async", order_log.violations, rounds);
    CHECK_EQ(order_log.appended, rounds);
}

static void submission_order(void) {
    check_section("serial queue, idle: async then sync, a million times, in order");
    dispatch_queue_t serial = dispatch_queue_create("order.serial", NULL);
    alternate(serial, false, ORDER_ROUNDS);

    check_section("serial queue kept busy by another thread: async then sync in order");
    busy_t busy;
    pthread_t thread;
    busy_start(&busy, &thread, serial);
    alternate(serial, false, ORDER_ROUNDS);
    busy_stop(&busy, thread);
    dispatch_release(serial);

    check_section("serial queue targeting a busy serial queue: async then sync in order");
    dispatch_queue_t outer = dispatch_queue_create("order.outer", NULL);
    dispatch_queue_t inner = dispatch_queue_create_with_target("order.inner", NULL, outer);
    busy_start(&busy, &thread, outer);
    alternate(inner, false, ORDER_ROUNDS);
    busy_stop(&busy, thread);
    dispatch_release(inner);
    dispatch_release(outer);

    check_section("concurrent queue kept busy: barrier_async then barrier_sync in order");
    dispatch_queue_t concurrent = dispatch_queue_create("order.concurrent", DISPATCH_QUEUE_CONCURRENT);
    busy_start(&busy, &thread, concurrent);
    alternate(concurrent, true, ORDER_ROUNDS);
    busy_stop(&busy, thread);
    dispatch_release(concurrent);
}

// MARK: - 2. The caller's thread

static __thread long thread_marker;
static pthread_mutex_t recursive_mutex;

typedef struct {
    pthread_t caller;
    long marker;
    dispatch_queue_t queue;
    dispatch_queue_t target;      // or NULL
    dispatch_queue_t outer;       // a queue the caller was already on, or NULL
    bool ran;
    bool same_thread;
    bool marker_seen;
    bool mutex_taken;
} probe_t;

static void probe(void *context) {
    probe_t *p = context;
    p->ran = true;
    p->same_thread = pthread_equal(pthread_self(), p->caller);
    p->marker_seen = thread_marker == p->marker;
    if (pthread_mutex_trylock(&recursive_mutex) == 0) {
        p->mutex_taken = true;
        pthread_mutex_unlock(&recursive_mutex);
    }
    // These abort (BUG IN CLIENT) when they fail.
    dispatch_assert_queue(p->queue);
    if (p->target) dispatch_assert_queue(p->target);
    if (p->outer) dispatch_assert_queue(p->outer);
}

typedef enum { VIA_SYNC, VIA_BARRIER_SYNC, VIA_ASYNC_AND_WAIT } sync_kind_t;

static const char *kind_name(sync_kind_t kind) {
    switch (kind) {
    case VIA_SYNC: return "dispatch_sync_f";
    case VIA_BARRIER_SYNC: return "dispatch_barrier_sync_f";
    case VIA_ASYNC_AND_WAIT: return "dispatch_async_and_wait_f";
    }
    return "?";
}

static void sleep_item(void *context) {
    sleep_ms((unsigned)(uintptr_t)context);
}

// Runs the probe through `kind` onto `queue` from the current thread, with `busy_on`
// (the queue, its target, or NULL) running a 30 ms item first so the caller must wait.
static void probe_once(sync_kind_t kind, dispatch_queue_t queue, dispatch_queue_t target,
                       dispatch_queue_t outer, dispatch_queue_t busy_on) {
    static long next_marker = 1000;
    probe_t p = {
        .caller = pthread_self(), .marker = __atomic_add_fetch(&next_marker, 1, __ATOMIC_RELAXED),
        .queue = queue, .target = target, .outer = outer,
    };
    thread_marker = p.marker;
    if (busy_on) {
        if (kind == VIA_BARRIER_SYNC || busy_on != queue) {
            dispatch_async_f(busy_on, (void *)(uintptr_t)30, sleep_item);
        } else {
            dispatch_barrier_async_f(busy_on, (void *)(uintptr_t)30, sleep_item);
        }
    }
    pthread_mutex_lock(&recursive_mutex);
    switch (kind) {
    case VIA_SYNC: dispatch_sync_f(queue, &p, probe); break;
    case VIA_BARRIER_SYNC: dispatch_barrier_sync_f(queue, &p, probe); break;
    case VIA_ASYNC_AND_WAIT: dispatch_async_and_wait_f(queue, &p, probe); break;
    }
    pthread_mutex_unlock(&recursive_mutex);
    CHECKF(p.ran, "%s returned before its function ran", kind_name(kind));
#ifdef GC_REFERENCE_LIBDISPATCH
    // libdispatch documents that async_and_wait may run the function on the thread that
    // serves the queue when one is already running it (and does so when it is busy);
    // GrandCentral runs it on the caller's thread, like dispatch_sync.
    if (kind == VIA_ASYNC_AND_WAIT && busy_on) return;
#endif
    CHECKF(p.same_thread, "%s ran its function on another thread (queue %s)", kind_name(kind),
           busy_on ? "busy" : "idle");
    CHECKF(p.marker_seen, "%s: the caller's __thread variable was not visible", kind_name(kind));
    CHECKF(p.mutex_taken, "%s: the caller's recursive mutex could not be taken again", kind_name(kind));
}

typedef struct {
    dispatch_queue_t serial, concurrent, outer, inner, caller_queue;
    bool from_queue;
} shapes_t;

static void probe_all_shapes(shapes_t *s, dispatch_queue_t outer) {
    for (int busy = 0; busy < 2; busy++) {
        for (sync_kind_t kind = VIA_SYNC; kind <= VIA_ASYNC_AND_WAIT; kind++) {
            // A serial queue.
            probe_once(kind, s->serial, NULL, outer, busy ? s->serial : NULL);
            // A concurrent queue: barrier_sync takes the whole queue, the others a unit.
            probe_once(kind, s->concurrent, NULL, outer, busy ? s->concurrent : NULL);
            // A serial queue whose target is a busy serial queue.
            probe_once(kind, s->inner, s->outer, outer, busy ? s->outer : NULL);
        }
    }
}

static void probe_from_queue(void *context) {
    shapes_t *s = context;
    probe_all_shapes(s, s->caller_queue);
}

static void callers_thread(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&recursive_mutex, &attr);
    pthread_mutexattr_destroy(&attr);

    shapes_t s;
    s.serial = dispatch_queue_create("caller.serial", NULL);
    s.concurrent = dispatch_queue_create("caller.concurrent", DISPATCH_QUEUE_CONCURRENT);
    s.outer = dispatch_queue_create("caller.outer", NULL);
    s.inner = dispatch_queue_create_with_target("caller.inner", NULL, s.outer);
    s.caller_queue = dispatch_queue_create("caller.own", NULL);

    check_section("sync, barrier_sync, async_and_wait from a plain thread run on it (idle and busy queues)");
    probe_all_shapes(&s, NULL);

    check_section("the same from an item of another queue: that queue stays asserted inside");
    for (int round = 0; round < 3; round++) {
        dispatch_sync_f(s.caller_queue, &s, probe_from_queue);
        // And from a worker thread (the caller's queue drained asynchronously).
        dispatch_group_t group = dispatch_group_create();
        dispatch_group_async_f(group, s.caller_queue, &s, probe_from_queue);
        CHECK_EQ(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_SEC)), 0);
        dispatch_release(group);
    }

    dispatch_release(s.serial);
    dispatch_release(s.concurrent);
    dispatch_release(s.inner);
    dispatch_release(s.outer);
    dispatch_release(s.caller_queue);
    pthread_mutex_destroy(&recursive_mutex);
}

// Many threads syncing onto one busy queue at once: each runs on its own thread.
enum { CONTENDERS = 4, CONTENDED_ROUNDS = 20000 };
static dispatch_queue_t contended_queue;
static atomic_long contended_wrong_thread;
static long contended_inside;      // touched only inside syncs on contended_queue
static atomic_long contended_overlap;

typedef struct { pthread_t self; } contender_t;

static void contended_probe(void *context) {
    contender_t *c = context;
    if (!pthread_equal(pthread_self(), c->self)) atomic_fetch_add(&contended_wrong_thread, 1);
    if (contended_inside++ != 0) atomic_fetch_add(&contended_overlap, 1);
    contended_inside--;
}

static void *contender(void *argument) {
    (void)argument;
    contender_t c = { .self = pthread_self() };
    for (int i = 0; i < CONTENDED_ROUNDS; i++) {
        if (i % 16 == 0) dispatch_async_f(contended_queue, NULL, noop_function);
        dispatch_sync_f(contended_queue, &c, contended_probe);
    }
    return NULL;
}

static void contended(void) {
    check_section("4 threads x 20,000 syncs onto one serial queue with async items between: each on its own thread, one at a time");
    contended_queue = dispatch_queue_create("caller.contended", NULL);
    pthread_t threads[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) CHECK_EQ(pthread_create(&threads[i], NULL, contender, NULL), 0);
    for (int i = 0; i < CONTENDERS; i++) pthread_join(threads[i], NULL);
    CHECK_EQ(atomic_load(&contended_wrong_thread), 0);
    CHECK_EQ(atomic_load(&contended_overlap), 0);
    dispatch_release(contended_queue);
}

// MARK: - 3. Nesting depth

enum { NEST_DEPTH = 1000 };
static dispatch_queue_t nest[NEST_DEPTH];
static dispatch_queue_t nest_target;
static char nest_labels[NEST_DEPTH][32];
static int nest_key, nest_target_key;
static bool nest_bottom_reached;

static void nest_down(void *context) {
    long depth = (long)(intptr_t)context;
    // The innermost queue is this level's.
    CHECK_STR(dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL), nest_labels[depth]);
    CHECK(dispatch_get_specific(&nest_key) == (void *)nest[depth]);
    if (depth + 1 < NEST_DEPTH) {
        dispatch_sync_f(nest[depth + 1], (void *)(intptr_t)(depth + 1), nest_down);
        return;
    }
    nest_bottom_reached = true;
    // Every queue of the nest is held by this thread.
    for (int i = 0; i < NEST_DEPTH; i++) dispatch_assert_queue(nest[i]);
    dispatch_assert_queue(nest_target);
    // The innermost queue's target chain answers for keys the queue itself lacks.
    CHECK(dispatch_get_specific(&nest_target_key) == (void *)nest_target);
}

static void nesting(void) {
    check_section("1,000 nested syncs: each level sees its queue; the innermost sees every one");
    nest_target = dispatch_queue_create("nest.target", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_specific(nest_target, &nest_target_key, nest_target, NULL);
    for (int i = 0; i < NEST_DEPTH; i++) {
        snprintf(nest_labels[i], sizeof nest_labels[i], "nest.%d", i);
        nest[i] = dispatch_queue_create_with_target(nest_labels[i], NULL, i == NEST_DEPTH - 1 ? nest_target : NULL);
        dispatch_queue_set_specific(nest[i], &nest_key, nest[i], NULL);
    }
    dispatch_sync_f(nest[0], (void *)(intptr_t)0, nest_down);
    CHECK(nest_bottom_reached);
    // Back outside: none of them is current any more.
    CHECK(dispatch_get_specific(&nest_key) == NULL);
    for (int i = 0; i < NEST_DEPTH; i++) dispatch_release(nest[i]);
    dispatch_release(nest_target);
}

// MARK: - 4. The main thread is on the main queue

static void on_main(void *context) {
    (void)context;
    dispatch_assert_queue(dispatch_get_main_queue());
    *(bool *)context = true;
}

static void main_thread_is_main_queue(void) {
    check_section("on the main thread, inside a sync onto another queue, the main queue is asserted");
    dispatch_assert_queue(dispatch_get_main_queue());
    dispatch_queue_t q = dispatch_queue_create("main.inside", NULL);
    bool ran = false;
    dispatch_sync_f(q, &ran, on_main);
    CHECK(ran);
    // With the queue busy, so the sync had to wait for a hand-off.
    ran = false;
    dispatch_async_f(q, (void *)(uintptr_t)20, sleep_item);
    dispatch_sync_f(q, &ran, on_main);
    CHECK(ran);
    dispatch_release(q);
}

// MARK: - 5. Still diagnosed

static dispatch_queue_t cycle_a, cycle_b;

static void back_to_a(void *context) {
    (void)context;
    dispatch_sync_f(cycle_a, NULL, noop_function);
}

static void to_b(void *context) {
    (void)context;
    dispatch_sync_f(cycle_b, NULL, back_to_a);
}

static void sync_cycle(void) {
    cycle_a = dispatch_queue_create("cycle.a", NULL);
    cycle_b = dispatch_queue_create("cycle.b", NULL);
    dispatch_sync_f(cycle_a, NULL, to_b);
}

static void sync_cycle_after_wait(void) {
    cycle_a = dispatch_queue_create("cycle.a", NULL);
    cycle_b = dispatch_queue_create("cycle.b", NULL);
    // Both busy, so every sync waits for its hand-off first.
    dispatch_async_f(cycle_a, (void *)(uintptr_t)20, sleep_item);
    dispatch_async_f(cycle_b, (void *)(uintptr_t)40, sleep_item);
    dispatch_sync_f(cycle_a, NULL, to_b);
}

static void diagnosed(void) {
    check_section("a cycle of nested syncs A -> B -> A is reported");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_cycle);
    check_section("the same cycle when each sync first waited for its turn");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_cycle_after_wait);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_sync and dispatch_barrier_sync run on the caller, in order");
    dispatch_queue_t q = dispatch_queue_create("blocks.serial", DISPATCH_QUEUE_CONCURRENT);
    pthread_t me = pthread_self();
    __block long appended = 0;
    __block long violations = 0;
    __block long wrong_thread = 0;
    for (long i = 0; i < 100000; i++) {
        dispatch_barrier_async(q, ^{ if (appended != i) violations++; appended = i + 1; });
        dispatch_barrier_sync(q, ^{
            if (appended != i + 1) violations++;
            if (!pthread_equal(pthread_self(), me)) wrong_thread++;
        });
        if (i % 1000 == 0) {
            dispatch_async(q, ^{ sleep_ms(1); });
            dispatch_sync(q, ^{ if (!pthread_equal(pthread_self(), me)) wrong_thread++; });
        }
    }
    CHECK_EQ(violations, 0);
    CHECK_EQ(wrong_thread, 0);
    dispatch_release(q);
}
#endif

int main(void) {
    check_start("sync_contract", 240);
    diagnosed();   // first: the forked children start from an unused library
    main_thread_is_main_queue();
    callers_thread();
    contended();
    nesting();
#ifdef __BLOCKS__
    blocks();
#endif
    submission_order();
    check_pass();
    return 0;
}
