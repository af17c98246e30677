// What every source shares: the cancel handler runs exactly once, after the last event
// handler returned; the event handler never runs concurrently with itself, even on a
// concurrent target; handlers run on the target queue, and dispatch_set_target_queue
// moves them; the registration handler runs once, before the first event handler; a
// cancelled suspended source runs its cancel handler only after it is resumed; the
// type-generic dispatch_cancel/dispatch_testcancel accept a source; the _f handlers get
// the source's context as it is when they run; dispatch_source_create returns NULL for a
// bad type, handle or mask; and misuse (NULL sources, set_timer on a non-timer,
// over-resume, releasing an inactive or suspended source) is a reported client bug.
#include "check.h"

// MARK: - Misuse (first: expect_client_bug wants a process that has not used dispatch)

static dispatch_source_t volatile null_source;  // NULL, hidden from -Wnonnull

static void cancel_null(void) { dispatch_source_cancel(null_source); }
static void get_data_null(void) {
    uintptr_t data = dispatch_source_get_data(null_source);
    printf("%lu\n", (unsigned long)data);
}
static void merge_data_null(void) { dispatch_source_merge_data(null_source, 1); }
static void set_timer_null(void) { dispatch_source_set_timer(null_source, DISPATCH_TIME_NOW, NSEC_PER_SEC, 0); }

static void set_timer_on_data_source(void) {
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
    dispatch_source_set_timer(source, DISPATCH_TIME_NOW, NSEC_PER_SEC, 0);
}

static void over_resume(void) {
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
    dispatch_activate(source);
    dispatch_resume(source);
}

static void release_inactive(void) {
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
    dispatch_release(source);
}

static void release_suspended(void) {
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, NULL);
    dispatch_activate(source);
    dispatch_suspend(source);
    dispatch_release(source);
}

static void misuse(void) {
    check_section("misuse: NULL sources, set_timer on a data source, over-resume, releasing inactive/suspended");
    expect_client_bug("dispatch_source_cancel", cancel_null);
    expect_client_bug("dispatch_source_get_data", get_data_null);
    expect_client_bug("dispatch_source_merge_data", merge_data_null);
    expect_client_bug("dispatch_source_set_timer", set_timer_null);
    expect_client_bug("dispatch_source_set_timer", set_timer_on_data_source);
    expect_client_bug("dispatch_resume", over_resume);
    expect_client_bug("dispatch_release", release_inactive);
    expect_client_bug("dispatch_release", release_suspended);
}

// MARK: - Bad arguments

static void create_rejects(void) {
    check_section("dispatch_source_create returns NULL for a handle or mask the type does not take");
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 1, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 5, 0, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR, 0, 2, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_REPLACE, 1, 0, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)-1, 0, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, 0, 1, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_WRITE, (uintptr_t)-1, 0, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 4, NULL) == NULL);
#ifndef GC_REFERENCE_LIBDISPATCH
    // libdispatch dereferences the type and crashes on these; GrandCentral checks that the
    // type is one of its own and returns NULL otherwise.
    static const uint64_t not_a_type[4];
    CHECK(dispatch_source_create((dispatch_source_type_t)(const void *)not_a_type, 0, 0, NULL) == NULL);
    CHECK(dispatch_source_create(NULL, 0, 0, NULL) == NULL);
#endif
    // And what they take: handle 0 and mask 0 for data sources; STRICT for a timer.
    dispatch_source_t ok[3] = {
        dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, NULL),
        dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, DISPATCH_TIMER_STRICT, NULL),
        dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, 0, 0, NULL),
    };
    for (int i = 0; i < 3; i++) {
        CHECK(ok[i] != NULL);
        dispatch_activate(ok[i]);  // an inactive source may not be released
        dispatch_source_cancel(ok[i]);
        dispatch_release(ok[i]);
    }
}

// MARK: - Cancel after the last event handler

typedef struct {
    dispatch_source_t source;
    atomic_long in_handler;
    atomic_long events;
    atomic_long cancels;
    atomic_long cancel_while_in_handler;
    _Atomic uint64_t handler_end;
    _Atomic uint64_t cancel_start;
} slow_t;

static void slow_event(void *context) {
    slow_t *slow = context;
    atomic_store(&slow->in_handler, 1);
    atomic_fetch_add(&slow->events, 1);
    sleep_ms(50);
    atomic_store(&slow->handler_end, now_ns());
    atomic_store(&slow->in_handler, 0);
}

static void slow_cancel(void *context) {
    slow_t *slow = context;
    atomic_store(&slow->cancel_start, now_ns());
    if (atomic_load(&slow->in_handler)) atomic_fetch_add(&slow->cancel_while_in_handler, 1);
    atomic_fetch_add(&slow->cancels, 1);
}

static void cancel_after_last_handler(void) {
    check_section("the cancel handler runs once, after the event handler running at the cancel returned");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-life.slow", DISPATCH_QUEUE_CONCURRENT);
    for (int round = 0; round < 5; round++) {
        static slow_t slow;
        memset(&slow, 0, sizeof slow);
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, queue);
        slow.source = source;
        dispatch_set_context(source, &slow);
        dispatch_source_set_event_handler_f(source, slow_event);
        dispatch_source_set_cancel_handler_f(source, slow_cancel);
        dispatch_activate(source);
        dispatch_source_merge_data(source, 1);
        WAIT_FOR_COUNT(&slow.in_handler, 1, 10);
        dispatch_source_merge_data(source, 1);  // pending at the cancel: never delivered
        dispatch_source_cancel(source);
        CHECK(dispatch_source_testcancel(source) != 0);
        WAIT_FOR_COUNT(&slow.cancels, 1, 10);
        sleep_ms(20);
        CHECK_EQ(atomic_load(&slow.cancels), 1);
        CHECK_EQ(atomic_load(&slow.events), 1);
        CHECK_EQ(atomic_load(&slow.cancel_while_in_handler), 0);
        CHECKF(atomic_load(&slow.cancel_start) >= atomic_load(&slow.handler_end),
               "the cancel handler started %.3f ms before the event handler returned",
               (double)(atomic_load(&slow.handler_end) - atomic_load(&slow.cancel_start)) / 1e6);
        dispatch_release(source);
    }
    dispatch_release(queue);
}

// MARK: - Never concurrent with itself

#define MERGE_THREADS 4
#define MERGES_PER_THREAD 25000

static concurrency_t exclusive;
static atomic_ulong exclusive_total;
static atomic_long exclusive_calls;
static dispatch_source_t exclusive_source;

static void exclusive_event(void *context) {
    (void)context;
    concurrency_enter(&exclusive);
    long call = atomic_fetch_add(&exclusive_calls, 1);
    if (call % 8 == 0) busy_wait_ns(20000);  // widen the window for a second drain
    atomic_fetch_add(&exclusive_total, dispatch_source_get_data(exclusive_source));
    concurrency_exit(&exclusive);
}

static void *exclusive_merger(void *context) {
    (void)context;
    for (int i = 0; i < MERGES_PER_THREAD; i++) {
        dispatch_source_merge_data(exclusive_source, 1);
        if (i % 500 == 0) sched_yield();
    }
    return NULL;
}

static void never_concurrent(void) {
    check_section("the event handler never runs concurrently with itself on a concurrent target (100,000 merges, 4 threads)");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-life.exclusive", DISPATCH_QUEUE_CONCURRENT);
    exclusive_source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, queue);
    dispatch_source_set_event_handler_f(exclusive_source, exclusive_event);
    dispatch_activate(exclusive_source);
    pthread_t threads[MERGE_THREADS];
    for (int t = 0; t < MERGE_THREADS; t++) CHECK_EQ(pthread_create(&threads[t], NULL, exclusive_merger, NULL), 0);
    for (int t = 0; t < MERGE_THREADS; t++) pthread_join(threads[t], NULL);
    uint64_t deadline = now_ns() + 20 * NSEC_PER_SEC;
    while (atomic_load(&exclusive_total) != MERGE_THREADS * MERGES_PER_THREAD && now_ns() < deadline) sleep_ms(1);
    CHECK_EQ(atomic_load(&exclusive_total), MERGE_THREADS * MERGES_PER_THREAD);
    printf("   %ld handler calls, at most %ld at once\n", atomic_load(&exclusive_calls), atomic_load(&exclusive.most));
    CHECK_EQ(atomic_load(&exclusive.most), 1);
    dispatch_source_cancel(exclusive_source);
    dispatch_release(exclusive_source);
    dispatch_release(queue);
}

// MARK: - Where and when the handlers run

typedef struct {
    dispatch_source_t source;
    const char *label;          // the label the handlers must see
    atomic_long registrations;
    atomic_long events;
    atomic_long cancels;
    atomic_long wrong_queue;
    atomic_long events_before_registration;
    atomic_long registrations_at_first_event;   // -1 until the first event
    void *contexts[3];          // the context each kind of handler last received
} where_t;

static bool on_label(const char *label) {
    const char *current = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    return current != NULL && strcmp(current, label) == 0;
}

static where_t *where_current;   // the probe the handlers report to (their context varies)

static void where_registration(void *context) {
    where_t *where = where_current;
    where->contexts[2] = context;
    if (!on_label(where->label)) atomic_fetch_add(&where->wrong_queue, 1);
    if (atomic_load(&where->events) != 0) atomic_fetch_add(&where->events_before_registration, 1);
    atomic_fetch_add(&where->registrations, 1);
}

static void where_event(void *context) {
    where_t *where = where_current;
    where->contexts[0] = context;
    if (!on_label(where->label)) atomic_fetch_add(&where->wrong_queue, 1);
    long expected = -1;
    atomic_compare_exchange_strong(&where->registrations_at_first_event, &expected, atomic_load(&where->registrations));
    atomic_fetch_add(&where->events, 1);
}

static void where_cancel(void *context) {
    where_t *where = where_current;
    where->contexts[1] = context;
    if (!on_label(where->label)) atomic_fetch_add(&where->wrong_queue, 1);
    atomic_fetch_add(&where->cancels, 1);
}

static dispatch_source_t where_source(where_t *where, dispatch_queue_t queue, const char *label) {
    memset(where, 0, sizeof *where);
    atomic_store(&where->registrations_at_first_event, -1);
    where->label = label;
    where_current = where;
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, queue);
    CHECK(source != NULL);
    where->source = source;
    dispatch_source_set_registration_handler_f(source, where_registration);
    dispatch_source_set_event_handler_f(source, where_event);
    dispatch_source_set_cancel_handler_f(source, where_cancel);
    return source;
}

static char context_a, context_b, context_c;

static void handlers_on_target(void) {
    check_section("handlers run on the target queue; the registration handler once, before the first event");
    const char *label = "com.grandcentral.tests.source-life.target";
    dispatch_queue_t queue = dispatch_queue_create(label, NULL);
    static where_t where;
    dispatch_source_t source = where_source(&where, queue, label);
    dispatch_source_merge_data(source, 5);   // before activation: delivered after the registration
    dispatch_activate(source);
    WAIT_FOR_COUNT(&where.events, 1, 10);
    dispatch_source_merge_data(source, 1);
    WAIT_FOR_COUNT(&where.events, 2, 10);
    dispatch_source_cancel(source);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&where.registrations), 1);
    CHECK_EQ(atomic_load(&where.registrations_at_first_event), 1);
    CHECK_EQ(atomic_load(&where.events_before_registration), 0);
    CHECK_EQ(atomic_load(&where.cancels), 1);
    CHECK_EQ(atomic_load(&where.wrong_queue), 0);
    dispatch_release(source);
    dispatch_release(queue);
}

static void context_at_call_time(void) {
    check_section("the _f handlers receive the source's context as it is when they run");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-life.context", NULL);
    static where_t where;
    dispatch_source_t source = where_source(&where, queue, "com.grandcentral.tests.source-life.context");
    dispatch_set_context(source, &context_a);
    dispatch_set_context(source, &context_b);   // after the handlers were set
    dispatch_activate(source);
    dispatch_source_merge_data(source, 1);
    WAIT_FOR_COUNT(&where.events, 1, 10);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK(where.contexts[2] == &context_b);
    CHECK(where.contexts[0] == &context_b);
    dispatch_set_context(source, &context_c);
    dispatch_source_merge_data(source, 1);
    WAIT_FOR_COUNT(&where.events, 2, 10);
    dispatch_sync_f(queue, NULL, noop_function);
    dispatch_source_cancel(source);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    CHECK(dispatch_get_context(source) == &context_c);
#ifdef GC_REFERENCE_LIBDISPATCH
    // libdispatch (observed) fixes an _f event handler's context when the source is
    // activated: a later dispatch_set_context does not reach it (its cancel handler does
    // see the new one). GrandCentral reads the context at each call of every handler, as
    // its source.h says; the two agree for the usual order (set the context, then activate).
    CHECK(where.contexts[0] == &context_b);
#else
    CHECK(where.contexts[0] == &context_c);
#endif
    CHECK(where.contexts[1] == &context_c);
    dispatch_release(source);
    dispatch_release(queue);
}

static void set_target_moves_handlers(void) {
    check_section("dispatch_set_target_queue on a source moves its handlers to the new queue");
    dispatch_queue_t first = dispatch_queue_create("com.grandcentral.tests.source-life.first", NULL);
    const char *label = "com.grandcentral.tests.source-life.second";
    dispatch_queue_t second = dispatch_queue_create(label, NULL);
    static where_t where;
    dispatch_source_t source = where_source(&where, first, label);
    dispatch_set_target_queue(source, second);
    dispatch_activate(source);
    dispatch_source_merge_data(source, 1);
    WAIT_FOR_COUNT(&where.events, 1, 10);
    dispatch_source_cancel(source);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    CHECK_EQ(atomic_load(&where.registrations), 1);
    CHECK_EQ(atomic_load(&where.wrong_queue), 0);
    dispatch_release(source);
    dispatch_release(first);
    dispatch_release(second);
}

// MARK: - Cancel while suspended

static void cancelled_while_suspended(void) {
    check_section("a cancelled suspended source runs its cancel handler only after it is resumed");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-life.suspended", NULL);
    static where_t where;
    dispatch_source_t source = where_source(&where, queue, "com.grandcentral.tests.source-life.suspended");
    dispatch_activate(source);
    WAIT_FOR_COUNT(&where.registrations, 1, 10);
    dispatch_suspend(source);
    dispatch_source_merge_data(source, 1);
    dispatch_source_cancel(source);
    CHECK(dispatch_source_testcancel(source) != 0);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&where.cancels), 0);
    CHECK_EQ(atomic_load(&where.events), 0);
    dispatch_resume(source);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&where.cancels), 1);
    CHECK_EQ(atomic_load(&where.events), 0);  // cancelled before it could run
    dispatch_release(source);

    // Suspended twice, cancelled, resumed once: still held.
    source = where_source(&where, queue, "com.grandcentral.tests.source-life.suspended");
    dispatch_activate(source);
    dispatch_suspend(source);
    dispatch_suspend(source);
    dispatch_source_cancel(source);
    dispatch_resume(source);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&where.cancels), 0);
    dispatch_resume(source);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    dispatch_release(source);
    dispatch_release(queue);
}

// MARK: - Type-generic cancel

static void type_generic_cancel(void) {
#if defined(dispatch_cancel) && defined(dispatch_testcancel)
    check_section("dispatch_cancel and dispatch_testcancel (type-generic) take a source");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-life.generic", NULL);
    static where_t where;
    dispatch_source_t source = where_source(&where, queue, "com.grandcentral.tests.source-life.generic");
    dispatch_activate(source);
    CHECK_EQ(dispatch_testcancel(source), 0);
    dispatch_cancel(source);
    CHECK(dispatch_testcancel(source) != 0);
    CHECK(dispatch_source_testcancel(source) != 0);
    WAIT_FOR_COUNT(&where.cancels, 1, 10);
    dispatch_cancel(source);  // twice: nothing more
    sleep_ms(20);
    CHECK_EQ(atomic_load(&where.cancels), 1);
    dispatch_release(source);
    dispatch_release(queue);
#else
#error "<dispatch/object.h> defines dispatch_cancel and dispatch_testcancel as _Generic macros in C11"
#endif
}

// MARK: - Blocks

#ifdef __BLOCKS__
static void block_handlers(void) {
    check_section("block handlers: registration, event and cancel, in that order, on the target queue");
    const char *label = "com.grandcentral.tests.source-life.blocks";
    dispatch_queue_t queue = dispatch_queue_create(label, DISPATCH_QUEUE_CONCURRENT);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR, 0, 0, queue);
    static char order_storage[8];
    memset(order_storage, 0, sizeof order_storage);
    char *order = order_storage;
    __block int used = 0;
    __block atomic_long wrong = 0, done = 0;
    dispatch_source_set_registration_handler(source, ^{
        if (!on_label(label)) atomic_fetch_add(&wrong, 1);
        order[used++] = 'r';
    });
    dispatch_source_set_event_handler(source, ^{
        if (!on_label(label)) atomic_fetch_add(&wrong, 1);
        if (used < 6) order[used++] = 'e';
        dispatch_cancel(source);
    });
    dispatch_source_set_cancel_handler(source, ^{
        if (!on_label(label)) atomic_fetch_add(&wrong, 1);
        order[used++] = 'c';
        atomic_store(&done, 1);
    });
    dispatch_source_merge_data(source, 2);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&done, 1, 10);
    CHECK_STR(order, "rec");
    CHECK_EQ(atomic_load(&wrong), 0);
    dispatch_release(source);
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("source_lifecycle", 55);
    misuse();  // first: the children must start from a library nobody has used
    create_rejects();
    cancel_after_last_handler();
    never_concurrent();
    handlers_on_target();
    context_at_call_time();
    set_target_moves_handlers();
    cancelled_while_suspended();
    type_generic_cancel();
#ifdef __BLOCKS__
    block_handlers();
#endif
    check_pass();
    return 0;
}
