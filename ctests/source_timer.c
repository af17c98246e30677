// Timer sources (DISPATCH_SOURCE_TYPE_TIMER): a repeating timer counts its fires in its
// data and does not drift; a one-shot timer fires once; a start of DISPATCH_TIME_FOREVER
// never fires; setting the timer again moves it; a suspended timer coalesces its fires;
// no fire is early; a dispatch_walltime start fires; huge starts and intervals neither
// fire early nor make the library spin; thousands of short timers created and cancelled
// in a loop each run their cancel handler exactly once.
//
// "Never early" is strict (each fire is measured with clock_gettime against a deadline
// computed *before* the timer was set, so it is a lower bound of the real one); lateness
// bounds are generous.
#include "check.h"

#include <sys/resource.h>

/// CPU time the whole process has used, in nanoseconds.
static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// MARK: - A probe: what a timer's handlers saw

#define PROBE_MAX_CALLS 1024

typedef struct {
    dispatch_source_t source;
    atomic_long calls;          // event handler calls
    atomic_long fires;          // sum of dispatch_source_get_data over the calls
    atomic_long cancels;        // cancel handler calls
    atomic_long after_cancel;   // event handler calls that started after the cancel handler
    atomic_long zero_data;      // event handler calls that saw data 0
    uint64_t call_at[PROBE_MAX_CALLS];      // CLOCK_MONOTONIC of each call (first ones)
    unsigned long data_at[PROBE_MAX_CALLS]; // and its data
    uint64_t busy_ns;           // how long each event handler call spins
    long cancel_at_fires;       // the event handler cancels once this many fires were seen (0: never)
} probe_t;

static void probe_event(void *context) {
    probe_t *probe = context;
    uint64_t at = now_ns();
    unsigned long data = dispatch_source_get_data(probe->source);
    if (atomic_load(&probe->cancels) != 0) atomic_fetch_add(&probe->after_cancel, 1);
    if (data == 0) atomic_fetch_add(&probe->zero_data, 1);
    long index = atomic_fetch_add(&probe->calls, 1);
    long fires = atomic_fetch_add(&probe->fires, (long)data) + (long)data;
    if (index < PROBE_MAX_CALLS) {
        probe->call_at[index] = at;
        probe->data_at[index] = data;
    }
    if (probe->busy_ns) busy_wait_ns(probe->busy_ns);
    if (probe->cancel_at_fires && fires >= probe->cancel_at_fires && fires - (long)data < probe->cancel_at_fires) {
        dispatch_source_cancel(probe->source);
    }
}

static void probe_cancel(void *context) {
    probe_t *probe = context;
    atomic_fetch_add(&probe->cancels, 1);
}

/// A timer source whose handlers (the _f forms, with the probe as the source's context)
/// fill `probe`. Not activated, not scheduled.
static dispatch_source_t probe_timer(probe_t *probe, dispatch_queue_t queue) {
    memset(probe, 0, sizeof *probe);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
    CHECK(source != NULL);
    probe->source = source;
    dispatch_set_context(source, probe);
    dispatch_source_set_event_handler_f(source, probe_event);
    dispatch_source_set_cancel_handler_f(source, probe_cancel);
    return source;
}

/// Cancels (if not cancelled already), waits for the cancel handler, releases.
static void probe_finish(probe_t *probe) {
    dispatch_source_cancel(probe->source);
    WAIT_FOR_COUNT(&probe->cancels, 1, 10);
    dispatch_release(probe->source);
    probe->source = NULL;
}

// MARK: - Repeating

static void repeating_does_not_drift(void) {
    check_section("a repeating 5 ms timer: 200 fires, each no earlier than due, no drift over 200 intervals");
    const uint64_t interval = 5 * NSEC_PER_MSEC;
    const long wanted = 200;
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.repeat", NULL);
    static probe_t probe;
    dispatch_source_t source = probe_timer(&probe, queue);
    // Each call spins 2 ms: an implementation that re-arms a repeating timer from the
    // moment a fire was handled (rather than from start + k * interval) drifts by 40%.
    probe.busy_ns = 2 * NSEC_PER_MSEC;
    probe.cancel_at_fires = wanted;
    uint64_t t0 = now_ns();  // before dispatch_time: fire k is due at or after t0 + k * interval
    dispatch_source_set_timer(source, dispatch_time(DISPATCH_TIME_NOW, (int64_t)interval), interval, 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 20);
    long calls = atomic_load(&probe.calls);
    long fires = atomic_load(&probe.fires);
    CHECK(calls >= 1 && calls <= PROBE_MAX_CALLS);
    CHECKF(fires >= wanted, "fires %ld < %ld", fires, wanted);
    CHECKF(calls <= fires, "%ld handler calls for %ld fires", calls, fires);
    CHECK_EQ(atomic_load(&probe.zero_data), 0);
    CHECK_EQ(atomic_load(&probe.after_cancel), 0);
    long seen = 0;
    uint64_t reached = 0;
    for (long i = 0; i < calls; i++) {
        seen += (long)probe.data_at[i];
        // The latest fire this call reports is fire number `seen`.
        uint64_t due = t0 + (uint64_t)seen * interval;
        CHECKF(probe.call_at[i] >= due, "call %ld reports fire %ld %.3f ms before it was due", i, seen,
               (double)(due - probe.call_at[i]) / 1e6);
        if (reached == 0 && seen >= wanted) reached = probe.call_at[i];
    }
    double elapsed_ms = (double)(reached - t0) / 1e6;
    printf("   %ld fires in %ld calls; fire %ld handled %.1f ms after the start (due at %.0f ms)\n", fires, calls,
           wanted, elapsed_ms, (double)wanted * 5);
    // Due at 1000 ms; a drifting timer (7 ms per period here) reaches it at 1400 ms.
    CHECKF(elapsed_ms < (double)wanted * 5 + 250, "fire %ld was handled %.1f ms after the start: the timer drifts",
           wanted, elapsed_ms);
    dispatch_release(source);
    dispatch_release(queue);
}

static void one_shot_fires_once(void) {
    check_section("a one-shot timer (interval DISPATCH_TIME_FOREVER) fires exactly once, with data 1");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.once", NULL);
    static probe_t probe;
    dispatch_source_t source = probe_timer(&probe, queue);
    uint64_t t0 = now_ns();
    dispatch_source_set_timer(source, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), DISPATCH_TIME_FOREVER, 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    sleep_ms(150);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    CHECK_EQ(probe.data_at[0], 1);
    CHECK(probe.call_at[0] >= t0 + 10 * NSEC_PER_MSEC);
    // Outside the handler, get_data keeps the last delivered value.
    CHECK_EQ(dispatch_source_get_data(source), 1);
    probe_finish(&probe);
    CHECK_EQ(atomic_load(&probe.cancels), 1);
    dispatch_release(queue);
}

static void start_forever_never_fires(void) {
    check_section("start DISPATCH_TIME_FOREVER never fires; setting it to NOW afterwards fires");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.forever", NULL);
    static probe_t repeating, once;
    dispatch_source_t a = probe_timer(&repeating, queue);
    dispatch_source_t b = probe_timer(&once, queue);
    dispatch_source_set_timer(a, DISPATCH_TIME_FOREVER, 5 * NSEC_PER_MSEC, 0);
    dispatch_source_set_timer(b, DISPATCH_TIME_FOREVER, DISPATCH_TIME_FOREVER, 0);
    dispatch_activate(a);
    dispatch_activate(b);
    sleep_ms(200);
    CHECK_EQ(atomic_load(&repeating.calls), 0);
    CHECK_EQ(atomic_load(&once.calls), 0);
    // Still alive: a new schedule takes.
    dispatch_source_set_timer(b, DISPATCH_TIME_NOW, DISPATCH_TIME_FOREVER, 0);
    WAIT_FOR_COUNT(&once.calls, 1, 10);
    CHECK_EQ(atomic_load(&repeating.calls), 0);
    probe_finish(&repeating);
    probe_finish(&once);
    CHECK_EQ(atomic_load(&once.calls), 1);
    dispatch_release(queue);
}

static void rearm_moves_it(void) {
    check_section("setting a timer again moves it: far then near fires near; near then far does not fire near");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.rearm", NULL);
    static probe_t near, far;

    // Far (10 s), then near (20 ms), on an active timer: fires near.
    dispatch_source_t a = probe_timer(&near, queue);
    dispatch_source_set_timer(a, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC), DISPATCH_TIME_FOREVER, 0);
    dispatch_activate(a);
    sleep_ms(20);
    uint64_t t0 = now_ns();
    dispatch_source_set_timer(a, dispatch_time(DISPATCH_TIME_NOW, 20 * NSEC_PER_MSEC), DISPATCH_TIME_FOREVER, 0);
    WAIT_FOR_COUNT(&near.calls, 1, 5);
    CHECK(near.call_at[0] >= t0 + 20 * NSEC_PER_MSEC);
    printf("   far then near: fired %.1f ms after the re-arm (due at 20 ms)\n", (double)(near.call_at[0] - t0) / 1e6);
    CHECKF(near.call_at[0] < t0 + 2 * NSEC_PER_SEC, "the re-armed timer fired %.1f ms after the re-arm",
           (double)(near.call_at[0] - t0) / 1e6);

    // Near (30 ms), then far (10 s): nothing at 30 ms.
    dispatch_source_t b = probe_timer(&far, queue);
    dispatch_source_set_timer(b, dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_MSEC), DISPATCH_TIME_FOREVER, 0);
    dispatch_activate(b);
    dispatch_source_set_timer(b, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC), DISPATCH_TIME_FOREVER, 0);
    // And a repeating one moved from every 5 ms to once in 10 s after it has fired.
    static probe_t slowed;
    dispatch_source_t c = probe_timer(&slowed, queue);
    dispatch_source_set_timer(c, DISPATCH_TIME_NOW, 5 * NSEC_PER_MSEC, 0);
    dispatch_activate(c);
    WAIT_FOR_COUNT(&slowed.calls, 1, 5);
    dispatch_source_set_timer(c, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC), 10 * NSEC_PER_SEC, 0);
    sleep_ms(30);  // a fire already in flight may still be delivered
    long settled = atomic_load(&slowed.calls);
    sleep_ms(200);
    CHECK_EQ(atomic_load(&far.calls), 0);
    CHECK_EQ(atomic_load(&slowed.calls), settled);
    probe_finish(&near);
    probe_finish(&far);
    probe_finish(&slowed);
    CHECK_EQ(atomic_load(&near.calls), 1);
    dispatch_release(queue);
}

static void suspended_timer_coalesces(void) {
    check_section("a suspended 5 ms timer runs no handler; after resume one call reports the missed fires");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.suspend", NULL);
    static probe_t probe;
    dispatch_source_t source = probe_timer(&probe, queue);
    dispatch_source_set_timer(source, DISPATCH_TIME_NOW, 5 * NSEC_PER_MSEC, 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    dispatch_suspend(source);
    sleep_ms(10);  // a handler already running finishes
    long before = atomic_load(&probe.calls);
    sleep_ms(80);
    CHECK_EQ(atomic_load(&probe.calls), before);
    dispatch_resume(source);
    WAIT_FOR_COUNT(&probe.calls, before + 1, 10);
    CHECK(before < PROBE_MAX_CALLS);
    unsigned long data = probe.data_at[before];
    printf("   the first call after an 80 ms suspension reports %lu fires\n", data);
    CHECKF(data > 1, "the first call after the suspension reports %lu fire(s)", data);
    probe_finish(&probe);
    dispatch_release(queue);
}

// MARK: - Never early

#define EARLY_TIMERS 40

typedef struct {
    probe_t probe;
    uint64_t due;       // CLOCK_MONOTONIC lower bound of the deadline
} early_t;

static void never_early(void) {
    check_section("40 one-shot timers at 1-40 ms with leeways up to 20 ms: each fires once, none early");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.early", DISPATCH_QUEUE_CONCURRENT);
    static early_t timers[EARLY_TIMERS];
    for (int i = 0; i < EARLY_TIMERS; i++) {
        dispatch_source_t source = probe_timer(&timers[i].probe, queue);
        uint64_t delay = (uint64_t)(1 + (i * 7) % EARLY_TIMERS) * NSEC_PER_MSEC;
        uint64_t leeway = (uint64_t)(i % 5) * 5 * NSEC_PER_MSEC;
        timers[i].due = now_ns() + delay;
        dispatch_source_set_timer(source, dispatch_time(DISPATCH_TIME_NOW, (int64_t)delay), DISPATCH_TIME_FOREVER, leeway);
        dispatch_activate(source);
    }
    for (int i = 0; i < EARLY_TIMERS; i++) WAIT_FOR_COUNT(&timers[i].probe.calls, 1, 10);
    sleep_ms(50);
    for (int i = 0; i < EARLY_TIMERS; i++) {
        CHECK_EQ(atomic_load(&timers[i].probe.calls), 1);
        CHECKF(timers[i].probe.call_at[0] >= timers[i].due, "timer %d fired %.3f ms early", i,
               (double)(timers[i].due - timers[i].probe.call_at[0]) / 1e6);
        probe_finish(&timers[i].probe);
    }
    dispatch_release(queue);
}

static void walltime_start_fires(void) {
    check_section("a dispatch_walltime start fires, not before its wall-clock time");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.wall", NULL);
    static probe_t probe;
    dispatch_source_t source = probe_timer(&probe, queue);
    uint64_t wall_due = realtime_ns() + 30 * NSEC_PER_MSEC;
    uint64_t mono_due = now_ns() + 30 * NSEC_PER_MSEC;
    dispatch_source_set_timer(source, dispatch_walltime(NULL, 30 * NSEC_PER_MSEC), DISPATCH_TIME_FOREVER, 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    uint64_t wall_now = realtime_ns();
    CHECK(wall_now >= wall_due);
    CHECK(probe.call_at[0] >= mono_due - 2 * NSEC_PER_MSEC);  // the clocks may be slewed a little
    sleep_ms(50);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    probe_finish(&probe);

    // A repeating wall-clock timer (start DISPATCH_WALLTIME_NOW, every 5 ms) keeps firing.
    static probe_t repeating;
    source = probe_timer(&repeating, queue);
    dispatch_source_set_timer(source, dispatch_walltime(NULL, 0), 5 * NSEC_PER_MSEC, 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&repeating.fires, 10, 10);
    probe_finish(&repeating);
    dispatch_release(queue);
}

// MARK: - Huge values

typedef struct {
    const char *what;
    dispatch_time_t start;      // 0 here means "computed at run time" (see below)
    int64_t start_delta;        // when start is 0: dispatch_time(DISPATCH_TIME_NOW, start_delta)
    uint64_t interval;
    uint64_t leeway;
    int expect;                 // fires expected in the window: 0, 1, or -1 for "0 or 1"
    probe_t probe;
} huge_t;

static void huge_values(void) {
    check_section("huge starts and intervals (INT64_MAX, UINT64_MAX-1, bit 63, bit 31/32): not early, no spin");
    static huge_t cases[] = {
        // Starts beyond the end of the uptime clock saturate to "never".
        { "start INT64_MAX", (dispatch_time_t)INT64_MAX, 0, 5 * NSEC_PER_MSEC, 0, 0, {0} },
        { "start INT64_MAX, one-shot", (dispatch_time_t)INT64_MAX, 0, DISPATCH_TIME_FOREVER, 0, 0, {0} },
        { "start INT64_MAX - 1, leeway UINT64_MAX", (dispatch_time_t)INT64_MAX - 1, 0, 1, UINT64_MAX, 0, {0} },
        // dispatch_time() saturates too.
        { "start now + INT64_MAX", 0, INT64_MAX, 5 * NSEC_PER_MSEC, 0, 0, {0} },
        // ~1 is DISPATCH_WALLTIME_NOW: it fires at once, and with this interval only once.
        { "start UINT64_MAX-1, interval UINT64_MAX-1", UINT64_MAX - 1, 0, UINT64_MAX - 1, 0, 1, {0} },
        // Bit 63 with a small value: an instant on the boot clock long past (libdispatch's
        // encoding), which fires at once; read as a wall-clock time it would be far in the
        // future. Either is not early; what matters is that it does not repeat or spin.
        { "start 1<<63 | 5, one-shot", (1ull << 63) | 5, 0, DISPATCH_TIME_FOREVER, 0, -1, {0} },
        { "start 1<<63 | 5, interval 1<<63 | 5", (1ull << 63) | 5, 0, (1ull << 63) | 5, 0, -1, {0} },
        // Deltas with bit 31 or bit 32 set: truncated to 32 bits they would be near.
        { "start now + 2^31 ns", 0, (int64_t)(1ull << 31), 5 * NSEC_PER_MSEC, 0, 0, {0} },
        { "start now + 2^32 + 5 ms", 0, (int64_t)((1ull << 32) + 5 * NSEC_PER_MSEC), 5 * NSEC_PER_MSEC, 0, 0, {0} },
        { "start now + 2^31 | 5 ms", 0, (int64_t)((1ull << 31) | 5 * NSEC_PER_MSEC), 1, 0, 0, {0} },
        // Start now, huge intervals: the first fire, then nothing within the window.
        { "start now, interval INT64_MAX", DISPATCH_TIME_NOW, 0, INT64_MAX, 0, 1, {0} },
        { "start now, interval UINT64_MAX-1", DISPATCH_TIME_NOW, 0, UINT64_MAX - 1, 0, 1, {0} },
        { "start now, interval 1<<63 | 5", DISPATCH_TIME_NOW, 0, (1ull << 63) | 5, 0, 1, {0} },
        { "start now, interval 2^31", DISPATCH_TIME_NOW, 0, 1ull << 31, 0, 1, {0} },
        { "start now, interval 2^32 + 1", DISPATCH_TIME_NOW, 0, (1ull << 32) + 1, 0, 1, {0} },
        { "start now, interval 2^31 | 1, leeway 2^63", DISPATCH_TIME_NOW, 0, (1ull << 31) | 1, 1ull << 63, 1, {0} },
    };
    const size_t count = sizeof cases / sizeof cases[0];
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.huge", NULL);
    for (size_t i = 0; i < count; i++) {
        dispatch_source_t source = probe_timer(&cases[i].probe, queue);
        dispatch_time_t start = cases[i].start;
        if (start == 0 && cases[i].start_delta != 0) start = dispatch_time(DISPATCH_TIME_NOW, cases[i].start_delta);
        dispatch_source_set_timer(source, start, cases[i].interval, cases[i].leeway);
        dispatch_activate(source);
    }
    sleep_ms(50);  // the immediate fires happen
    uint64_t cpu0 = process_cpu_ns();
    uint64_t t0 = now_ns();
    sleep_ms(200);
    uint64_t cpu = process_cpu_ns() - cpu0;
    uint64_t wall = now_ns() - t0;
    printf("   %zu huge timers: %.1f ms of CPU in %.1f ms\n", count, (double)cpu / 1e6, (double)wall / 1e6);
    for (size_t i = 0; i < count; i++) {
        long calls = atomic_load(&cases[i].probe.calls);
        long fires = atomic_load(&cases[i].probe.fires);
        printf("   %-44s %ld call(s), %ld fire(s)\n", cases[i].what, calls, fires);
        if (cases[i].expect >= 0) {
            CHECKF(fires == cases[i].expect, "%s: %ld fires, expected %d", cases[i].what, fires, cases[i].expect);
        } else {
            CHECKF(fires <= 1, "%s: %ld fires, expected at most one", cases[i].what, fires);
        }
        CHECKF(calls == fires, "%s: %ld calls, %ld fires", cases[i].what, calls, fires);
    }
    // An event thread spinning on a saturated deadline would burn a whole core (~200 ms).
    CHECKF(cpu < 60 * NSEC_PER_MSEC, "the process used %.1f ms of CPU in 200 ms with only far timers armed",
           (double)cpu / 1e6);
    for (size_t i = 0; i < count; i++) probe_finish(&cases[i].probe);
    dispatch_release(queue);
}

// MARK: - Many short timers

#define MANY_TIMERS 5000

typedef struct {
    atomic_int events;
    atomic_int cancels;
    atomic_int events_after_cancel;
} many_slot_t;

static many_slot_t many_slots[MANY_TIMERS];
static atomic_long many_cancelled;

static void many_event(void *context) {
    many_slot_t *slot = context;
    if (atomic_load(&slot->cancels) != 0) atomic_fetch_add(&slot->events_after_cancel, 1);
    atomic_fetch_add(&slot->events, 1);
}

static void many_cancel(void *context) {
    many_slot_t *slot = context;
    atomic_fetch_add(&slot->cancels, 1);
    atomic_fetch_add(&many_cancelled, 1);
}

static void many_short_timers(void) {
    check_section("5,000 short timers created, activated, cancelled and released: each cancel handler runs once");
    dispatch_queue_t queues[4];
    for (int q = 0; q < 4; q++) {
        queues[q] = dispatch_queue_create("com.grandcentral.tests.source-timer.many", q == 3 ? DISPATCH_QUEUE_CONCURRENT : NULL);
    }
    atomic_store(&many_cancelled, 0);
    uint64_t t0 = now_ns();
    for (int i = 0; i < MANY_TIMERS; i++) {
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queues[i % 4]);
        CHECK(source != NULL);
        dispatch_set_context(source, &many_slots[i]);
        dispatch_source_set_event_handler_f(source, many_event);
        dispatch_source_set_cancel_handler_f(source, many_cancel);
        // Some due at once, some within a millisecond or two, repeating or not.
        uint64_t delay = (uint64_t)(i % 3) * 500 * NSEC_PER_USEC;
        uint64_t interval = i % 2 ? NSEC_PER_MSEC : DISPATCH_TIME_FOREVER;
        dispatch_source_set_timer(source, dispatch_time(DISPATCH_TIME_NOW, (int64_t)delay), interval, 0);
        dispatch_activate(source);
        if (i % 16 == 0) sleep_ms(1);  // let some of them fire first
        if (i % 5 == 0) sched_yield();
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
    WAIT_FOR_COUNT(&many_cancelled, MANY_TIMERS, 30);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&many_cancelled), MANY_TIMERS);
    long fired = 0;
    for (int i = 0; i < MANY_TIMERS; i++) {
        CHECKF(atomic_load(&many_slots[i].cancels) == 1, "timer %d ran its cancel handler %d times", i,
               atomic_load(&many_slots[i].cancels));
        CHECKF(atomic_load(&many_slots[i].events_after_cancel) == 0, "timer %d fired after its cancel handler", i);
        fired += atomic_load(&many_slots[i].events) > 0;
    }
    printf("   %d timers in %.0f ms, %ld fired before their cancel\n", MANY_TIMERS, (double)(now_ns() - t0) / 1e6,
           fired);
    for (int q = 0; q < 4; q++) dispatch_release(queues[q]);
}

// MARK: - Blocks

#ifdef __BLOCKS__
static void block_handlers(void) {
    check_section("block handlers: a 2 ms timer fires 10 times, then its cancel handler runs once");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.blocks", NULL);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, DISPATCH_TIMER_STRICT, queue);
    CHECK(source != NULL);
    __block long fires = 0;
    __block atomic_long cancels = 0;
    dispatch_source_set_event_handler(source, ^{
        fires += (long)dispatch_source_get_data(source);
        if (fires >= 10) dispatch_source_cancel(source);
    });
    dispatch_source_set_cancel_handler(source, ^{ atomic_fetch_add(&cancels, 1); });
    dispatch_source_set_timer(source, DISPATCH_TIME_NOW, 2 * NSEC_PER_MSEC, 0);
    dispatch_resume(source);  // resume activates an inactive source
    WAIT_FOR_COUNT(&cancels, 1, 10);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK(fires >= 10);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&cancels), 1);
    dispatch_release(source);
    dispatch_release(queue);
}
#endif

// MARK: - Setting a timer again drops the old schedule's fires; suspended before activation

typedef struct {
    dispatch_source_t source;
    atomic_ulong data;
    atomic_long calls;
    atomic_ulong last_call_ns;
} settimer_probe_t;

static void settimer_event(void *context) {
    settimer_probe_t *probe = context;
    atomic_fetch_add(&probe->data, dispatch_source_get_data(probe->source));
    atomic_store(&probe->last_call_ns, now_ns());
    atomic_fetch_add(&probe->calls, 1);
}

static void block_queue(void *context) { dispatch_semaphore_wait((dispatch_semaphore_t)context, DISPATCH_TIME_FOREVER); }

static void set_timer_drops_pending_fires(void) {
    check_section("setting a timer again drops the fires merged for its old schedule");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.reset", NULL);
    static settimer_probe_t probe;
    probe.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
    dispatch_set_context(probe.source, &probe);
    dispatch_source_set_event_handler_f(probe.source, settimer_event);
    // The target is busy until after the reset, so the 10 ms timer's fires pile up as
    // pending data (a timed block raced with this thread's sleep on a loaded machine).
    dispatch_semaphore_t unblock = dispatch_semaphore_create(0);
    dispatch_async_f(queue, unblock, block_queue);
    dispatch_source_set_timer(probe.source, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), 10 * NSEC_PER_MSEC, 0);
    dispatch_activate(probe.source);
    sleep_ms(60);
    uint64_t reset = now_ns();
    dispatch_source_set_timer(probe.source, dispatch_time(DISPATCH_TIME_NOW, 300 * NSEC_PER_MSEC),
                              DISPATCH_TIME_FOREVER, 0);
    dispatch_semaphore_signal(unblock);
    WAIT_FOR_COUNT(&probe.calls, 1, 5);
    CHECKF(atomic_load(&probe.last_call_ns) >= reset + 300 * NSEC_PER_MSEC,
           "the first handler call came %.1f ms after the reset, before the new start (old fires were kept)",
           (double)(atomic_load(&probe.last_call_ns) - reset) / 1e6);
    CHECK_EQ(atomic_load(&probe.data), 1);
    dispatch_source_cancel(probe.source);
    dispatch_release(probe.source);
    dispatch_release(unblock);
    dispatch_release(queue);
}

static void suspended_before_activation_costs_nothing(void) {
    check_section("a timer suspended before activation does not fire (or cost CPU) until resumed");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.presuspended", NULL);
    static settimer_probe_t probe;
    memset(&probe, 0, sizeof probe);
    probe.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
    dispatch_set_context(probe.source, &probe);
    dispatch_source_set_event_handler_f(probe.source, settimer_event);
    dispatch_source_set_timer(probe.source, DISPATCH_TIME_NOW, 50 * NSEC_PER_USEC, 0);
    dispatch_suspend(probe.source);
    dispatch_activate(probe.source);
    uint64_t cpu0 = process_cpu_ns();
    sleep_ms(300);
    uint64_t cpu = process_cpu_ns() - cpu0;
    CHECK_EQ(atomic_load(&probe.calls), 0);
    CHECKF(cpu < 60 * NSEC_PER_MSEC, "%.1f ms of CPU in 300 ms while suspended", (double)cpu / 1e6);
    dispatch_resume(probe.source);
    WAIT_FOR_COUNT(&probe.calls, 1, 5);
    CHECKF(atomic_load(&probe.data) > 1, "the suspended fires were coalesced (data %lu)", atomic_load(&probe.data));
    dispatch_source_cancel(probe.source);
    dispatch_release(probe.source);
    dispatch_release(queue);
}

#define PRESUSPENDED_ROUNDS 200

typedef struct {
    dispatch_source_t source;
    atomic_ulong first_data;
    atomic_long calls;
} first_call_probe_t;

static void nothing(void *context) { (void)context; }

static void first_call_event(void *context) {
    first_call_probe_t *probe = context;
    unsigned long data = dispatch_source_get_data(probe->source);
    if (atomic_load(&probe->calls) == 0) atomic_store(&probe->first_data, data);
    atomic_fetch_add(&probe->calls, 1);
}

// The library once left the fires missed while suspended to the event thread, racing with
// the resume's wakeup of the source: a fire merged before the suspension took effect (a
// timer started at NOW fires at once on activation) was delivered alone, with data 1, and
// the missed fires in a second call. libdispatch counts them all into the first call.
static void resume_reports_all_missed_fires(void) {
    check_section("the first handler call after a resume reports every fire missed while suspended (200 rounds)");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.resume-rounds", NULL);
    static first_call_probe_t probe;
    int short_rounds = 0;
    unsigned long worst = ~0UL;
    for (int round = 0; round < PRESUSPENDED_ROUNDS; round++) {
        atomic_store(&probe.calls, 0);
        atomic_store(&probe.first_data, 0);
        probe.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
        dispatch_set_context(probe.source, &probe);
        dispatch_source_set_event_handler_f(probe.source, first_call_event);
        dispatch_source_set_timer(probe.source, DISPATCH_TIME_NOW, 50 * NSEC_PER_USEC, 0);
        dispatch_suspend(probe.source);
        dispatch_activate(probe.source);
        // At least 5 ms: at least 100 fires of the 50 µs timer are due by the resume.
        sleep_ms(5);
        dispatch_resume(probe.source);
        WAIT_FOR_COUNT(&probe.calls, 1, 5);
        unsigned long data = atomic_load(&probe.first_data);
        if (data < 100) short_rounds++;
        if (data < worst) worst = data;
        dispatch_source_cancel(probe.source);
        dispatch_release(probe.source);
        // No handler of this round is still running when the next round resets the probe:
        // none starts after the cancel, and one running holds the serial queue.
        dispatch_sync_f(queue, NULL, nothing);
    }
    CHECKF(short_rounds == 0, "%d of %d rounds: the first call after the resume reported fewer than 100 fires (least %lu)",
           short_rounds, PRESUSPENDED_ROUNDS, worst);
    dispatch_release(queue);
}

#define ACTIVE_SUSPEND_ROUNDS 300
#define ACTIVE_PROBE_CALLS 100000

typedef struct {
    dispatch_source_t source;
    atomic_long calls;
    unsigned long data_at[ACTIVE_PROBE_CALLS];
} calls_probe_t;

static void calls_probe_event(void *context) {
    calls_probe_t *probe = context;
    long call = atomic_load(&probe->calls);
    if (call < ACTIVE_PROBE_CALLS) probe->data_at[call] = dispatch_source_get_data(probe->source);
    atomic_fetch_add(&probe->calls, 1);
}

// The same for a running timer: fires merged between the suspend and the moment the event
// thread took the node out of its heap were pending at the resume, and were delivered
// alone, ahead of the missed fires.
static void resume_of_running_timer_reports_all_missed_fires(void) {
    check_section("a running 50 us timer suspended for 5 ms: the first call after each resume reports >= 100 fires (300 rounds)");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-timer.resume-running", NULL);
    static calls_probe_t probe;
    probe.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
    dispatch_set_context(probe.source, &probe);
    dispatch_source_set_event_handler_f(probe.source, calls_probe_event);
    dispatch_source_set_timer(probe.source, DISPATCH_TIME_NOW, 50 * NSEC_PER_USEC, 0);
    dispatch_activate(probe.source);
    int short_rounds = 0, calls_while_suspended = 0;
    unsigned long worst = ~0UL;
    for (int round = 0; round < ACTIVE_SUSPEND_ROUNDS; round++) {
        WAIT_FOR_COUNT(&probe.calls, atomic_load(&probe.calls) + 2, 5);
        dispatch_suspend(probe.source);
        dispatch_sync_f(queue, NULL, nothing);  // a handler already running finishes
        long before = atomic_load(&probe.calls);
        sleep_ms(5);  // at least 100 fires are due by the resume
        if (atomic_load(&probe.calls) != before) calls_while_suspended++;
        dispatch_resume(probe.source);
        WAIT_FOR_COUNT(&probe.calls, before + 1, 5);
        if (before >= ACTIVE_PROBE_CALLS) break;
        unsigned long data = probe.data_at[before];
        if (data < 100) short_rounds++;
        if (data < worst) worst = data;
    }
    CHECK_EQ(calls_while_suspended, 0);
    CHECKF(short_rounds == 0, "%d of %d rounds: the first call after the resume reported fewer than 100 fires (least %lu)",
           short_rounds, ACTIVE_SUSPEND_ROUNDS, worst);
    dispatch_source_cancel(probe.source);
    dispatch_release(probe.source);
    dispatch_release(queue);
}

int main(void) {
    check_start("source_timer", 50);
    repeating_does_not_drift();
    one_shot_fires_once();
    start_forever_never_fires();
    rearm_moves_it();
    suspended_timer_coalesces();
    never_early();
    walltime_start_fires();
    huge_values();
    many_short_timers();
    set_timer_drops_pending_fires();
    suspended_before_activation_costs_nothing();
    resume_reports_all_missed_fires();
    resume_of_running_timer_reports_all_missed_fires();
#ifdef __BLOCKS__
    block_handlers();
#endif
    check_pass();
    return 0;
}
