// dispatch_time_t and dispatch_after_f: the encoding (0 now, ~0 forever, ~1 wall-clock
// now, uptime nanoseconds below bit 63, wall-clock nanoseconds negated), saturating
// arithmetic, and timers that never fire early and fire in deadline order.
#include "check.h"

// MARK: - Encoding and arithmetic

static void constants(void) {
    check_section("constants have libdispatch's values");
    CHECK_EQ_U64(DISPATCH_TIME_NOW, 0);
    CHECK_EQ_U64(DISPATCH_TIME_FOREVER, ~0ull);
    CHECK_EQ_U64(DISPATCH_WALLTIME_NOW, ~1ull);
    CHECK_EQ_U64(NSEC_PER_SEC, 1000000000ull);
    CHECK_EQ_U64(NSEC_PER_MSEC, 1000000ull);
    CHECK_EQ_U64(NSEC_PER_USEC, 1000ull);
    CHECK_EQ_U64(USEC_PER_SEC, 1000000ull);
    CHECK_EQ(sizeof(dispatch_time_t), 8);
}

static void uptime_arithmetic(void) {
    check_section("dispatch_time(DISPATCH_TIME_NOW, 0) is the monotonic clock in nanoseconds");
    uint64_t before = now_ns();
    dispatch_time_t t0 = dispatch_time(DISPATCH_TIME_NOW, 0);
    uint64_t after = now_ns();
    CHECK(t0 != DISPATCH_TIME_NOW && t0 != DISPATCH_TIME_FOREVER);
    CHECK((int64_t)t0 > 0);   // uptime values stay below bit 63
    printf("   dispatch_time(NOW, 0) - CLOCK_MONOTONIC = %lld ns\n", (long long)(t0 - before));
    CHECKF(t0 >= before && t0 <= after, "dispatch_time(NOW, 0) = %llu outside [%llu, %llu]",
           (unsigned long long)t0, (unsigned long long)before, (unsigned long long)after);
    dispatch_time_t t1 = dispatch_time(DISPATCH_TIME_NOW, 0);
    CHECK(t1 >= t0);

    check_section("adding and subtracting deltas is exact");
    CHECK_EQ_U64(dispatch_time(t0, 0), t0);
    CHECK_EQ_U64(dispatch_time(t0, (int64_t)NSEC_PER_SEC), t0 + NSEC_PER_SEC);
    CHECK_EQ_U64(dispatch_time(t0, 1), t0 + 1);
    CHECK_EQ_U64(dispatch_time(dispatch_time(t0, 5 * (int64_t)NSEC_PER_SEC), -5 * (int64_t)NSEC_PER_SEC), t0);
    CHECK_EQ_U64(dispatch_time(t0, -1000), t0 - 1000);
    dispatch_time_t later = dispatch_time(DISPATCH_TIME_NOW, (int64_t)NSEC_PER_SEC);
    CHECK(later >= t0 + NSEC_PER_SEC && later < DISPATCH_TIME_FOREVER);

    check_section("arithmetic saturates: huge deltas give FOREVER, large negative ones the minimum");
    CHECK_EQ_U64(dispatch_time(DISPATCH_TIME_FOREVER, 0), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(DISPATCH_TIME_FOREVER, -(int64_t)NSEC_PER_SEC), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(DISPATCH_TIME_FOREVER, INT64_MAX), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(DISPATCH_TIME_NOW, INT64_MAX), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(t0, INT64_MAX), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(t0, INT64_MAX - 10), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time((dispatch_time_t)INT64_MAX - 5, 10), DISPATCH_TIME_FOREVER);
    // Below zero clamps to 1, the earliest time that is not DISPATCH_TIME_NOW (as libdispatch).
    CHECK_EQ_U64(dispatch_time(t0, -INT64_MAX), 1);
    CHECK_EQ_U64(dispatch_time(t0, INT64_MIN + 1), 1);
    CHECK_EQ_U64(dispatch_time(1, -1), 1);
    CHECK_EQ_U64(dispatch_time(1000, -2000), 1);
}

static void walltime_encoding(void) {
    check_section("wall-clock times are encoded negated");
    struct timespec one_second = { 1, 0 };
    CHECK_EQ_U64(dispatch_walltime(&one_second, 0), (dispatch_time_t)-1000000000LL);
    CHECK_EQ_U64(dispatch_walltime(&one_second, 500), (dispatch_time_t)-1000000500LL);
    struct timespec mixed = { 12, 345 };
    CHECK_EQ_U64(dispatch_walltime(&mixed, 0), (dispatch_time_t)-12000000345LL);

    uint64_t real_before = realtime_ns();
    dispatch_time_t w = dispatch_walltime(NULL, 0);
    uint64_t real_after = realtime_ns();
    CHECK((int64_t)w < 0);
    CHECK(w != DISPATCH_TIME_FOREVER && w != DISPATCH_WALLTIME_NOW);
    uint64_t decoded = (uint64_t)(-(int64_t)w);
    CHECKF(decoded + 1000 >= real_before && decoded <= real_after + 1000,
           "dispatch_walltime(NULL, 0) decodes to %llu, CLOCK_REALTIME was [%llu, %llu]",
           (unsigned long long)decoded, (unsigned long long)real_before, (unsigned long long)real_after);

    check_section("dispatch_time on a wall-clock time moves it (the encoding goes down)");
    CHECK_EQ_U64(dispatch_time(w, (int64_t)NSEC_PER_SEC), w - NSEC_PER_SEC);
    CHECK_EQ_U64(dispatch_time(w, -(int64_t)NSEC_PER_SEC), w + NSEC_PER_SEC);
    CHECK_EQ_U64(dispatch_time(dispatch_walltime(&one_second, 0), 7), (dispatch_time_t)-1000000007LL);
    CHECK_EQ_U64(dispatch_walltime(NULL, INT64_MAX), DISPATCH_TIME_FOREVER);
    CHECK_EQ_U64(dispatch_time(w, INT64_MAX), DISPATCH_TIME_FOREVER);

    check_section("DISPATCH_WALLTIME_NOW resolves to the wall clock");
    real_before = realtime_ns();
    dispatch_time_t now = dispatch_time(DISPATCH_WALLTIME_NOW, 0);
    dispatch_time_t soon = dispatch_time(DISPATCH_WALLTIME_NOW, 2 * (int64_t)NSEC_PER_SEC);
    real_after = realtime_ns();
    CHECK((int64_t)now < 0 && (int64_t)soon < 0);
    CHECK(now != DISPATCH_WALLTIME_NOW && now != DISPATCH_TIME_FOREVER);
    decoded = (uint64_t)(-(int64_t)now);
    CHECKF(decoded + 1000 >= real_before && decoded <= real_after + 1000,
           "dispatch_time(DISPATCH_WALLTIME_NOW, 0) decodes to %llu, CLOCK_REALTIME was [%llu, %llu]",
           (unsigned long long)decoded, (unsigned long long)real_before, (unsigned long long)real_after);
    uint64_t decoded_soon = (uint64_t)(-(int64_t)soon);
    CHECK(decoded_soon >= real_before + 2 * NSEC_PER_SEC && decoded_soon <= real_after + 2 * NSEC_PER_SEC + 1000);
}

// MARK: - dispatch_after_f

typedef struct {
    uint64_t submitted;        // CLOCK_MONOTONIC or CLOCK_REALTIME when submitted
    uint64_t delay;
    bool wall;
    uint64_t fired;
    long position;
} timer_probe_t;

static atomic_long fired_count;
static atomic_long early_count;
static long next_position;      // touched only on the serial queue the probes fire on

static void timer_fired(void *context) {
    timer_probe_t *probe = context;
    probe->fired = probe->wall ? realtime_ns() : now_ns();
    probe->position = next_position++;
    if (probe->fired < probe->submitted + probe->delay) atomic_fetch_add(&early_count, 1);
    atomic_fetch_add(&fired_count, 1);
}

static void after_not_early(void) {
    check_section("dispatch_after_f never fires before its deadline (uptime, wall clock, WALLTIME_NOW)");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.after", NULL);
    static timer_probe_t probes[9];
    const uint64_t delays_ms[3] = { 20, 50, 100 };
    atomic_store(&fired_count, 0);
    atomic_store(&early_count, 0);
    for (int i = 0; i < 9; i++) {
        timer_probe_t *p = &probes[i];
        p->delay = delays_ms[i % 3] * NSEC_PER_MSEC;
        p->wall = i >= 3;
        p->submitted = p->wall ? realtime_ns() : now_ns();
        dispatch_time_t when;
        if (i < 3) {
            when = dispatch_time(DISPATCH_TIME_NOW, (int64_t)p->delay);
        } else if (i < 6) {
            when = dispatch_walltime(NULL, (int64_t)p->delay);
        } else {
            when = dispatch_time(DISPATCH_WALLTIME_NOW, (int64_t)p->delay);
        }
        dispatch_after_f(when, queue, p, timer_fired);
    }
    WAIT_FOR_COUNT(&fired_count, 9, 20);
    for (int i = 0; i < 9; i++) {
        timer_probe_t *p = &probes[i];
        long long late_us = ((long long)p->fired - (long long)(p->submitted + p->delay)) / 1000;
        printf("   %s timer of %llu ms fired %lld us after its deadline\n", p->wall ? "wall" : "uptime",
               (unsigned long long)(p->delay / NSEC_PER_MSEC), late_us);
        CHECKF(p->fired >= p->submitted + p->delay, "timer %d (%llu ms) fired %lld us early", i,
               (unsigned long long)(p->delay / NSEC_PER_MSEC), -late_us);
    }
    dispatch_release(queue);
}

static void after_in_deadline_order(void) {
    check_section("timers fire in deadline order, not submission order");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.after-order", NULL);
    static timer_probe_t probes[6];
    const uint64_t delays_ms[6] = { 150, 30, 90, 10, 120, 60 };
    const long expected_position[6] = { 5, 1, 3, 0, 4, 2 };
    next_position = 0;
    atomic_store(&fired_count, 0);
    uint64_t start = now_ns();
    dispatch_time_t base = dispatch_time(DISPATCH_TIME_NOW, 0);
    for (int i = 0; i < 6; i++) {
        probes[i] = (timer_probe_t){ .submitted = start, .delay = delays_ms[i] * NSEC_PER_MSEC };
        dispatch_after_f(dispatch_time(base, (int64_t)probes[i].delay), queue, &probes[i], timer_fired);
    }
    WAIT_FOR_COUNT(&fired_count, 6, 20);
    for (int i = 0; i < 6; i++) {
        CHECKF(probes[i].position == expected_position[i], "the %llu ms timer fired at position %ld, expected %ld",
               (unsigned long long)delays_ms[i], probes[i].position, expected_position[i]);
    }

    check_section("a deadline of now or in the past fires promptly, on any kind of queue");
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.after-concurrent", DISPATCH_QUEUE_CONCURRENT);
    static timer_probe_t past[3];
    atomic_store(&fired_count, 0);
    atomic_store(&early_count, 0);
    dispatch_after_f(DISPATCH_TIME_NOW, queue, &past[0], timer_fired);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, -(int64_t)NSEC_PER_SEC), concurrent, &past[1], timer_fired);
    dispatch_after_f(dispatch_walltime(NULL, -(int64_t)NSEC_PER_SEC), dispatch_get_global_queue(QOS_CLASS_UTILITY, 0),
                     &past[2], timer_fired);
    WAIT_FOR_COUNT(&fired_count, 3, 10);
    dispatch_release(concurrent);
    dispatch_release(queue);
}

enum { MANY_TIMERS = 2000 };

static void many_timers(void) {
    check_section("2000 timers with scattered deadlines all fire once, none early");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.after-many", NULL);
    static timer_probe_t probes[MANY_TIMERS];
    atomic_store(&fired_count, 0);
    atomic_store(&early_count, 0);
    uint32_t seed = 12345;
    for (int i = 0; i < MANY_TIMERS; i++) {
        seed = seed * 1103515245u + 12345u;
        probes[i] = (timer_probe_t){ .delay = (uint64_t)(seed >> 8) % (200 * NSEC_PER_MSEC) };
        probes[i].submitted = now_ns();
        dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, (int64_t)probes[i].delay), queue, &probes[i], timer_fired);
    }
    WAIT_FOR_COUNT(&fired_count, MANY_TIMERS, 30);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&fired_count), MANY_TIMERS);
    CHECK_EQ(atomic_load(&early_count), 0);
    dispatch_release(queue);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_after");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.after-blocks", NULL);
    __block atomic_long ran = 0;
    __block uint64_t fired_at = 0;
    uint64_t start = now_ns();
    dispatch_after(dispatch_time(DISPATCH_TIME_NOW, 30 * (int64_t)NSEC_PER_MSEC), queue, ^{
        fired_at = now_ns();
        atomic_fetch_add(&ran, 1);
    });
    dispatch_after(dispatch_walltime(NULL, 10 * (int64_t)NSEC_PER_MSEC), queue, ^{ atomic_fetch_add(&ran, 1); });
    WAIT_FOR_COUNT(&ran, 2, 10);
    CHECK(fired_at >= start + 30 * NSEC_PER_MSEC);
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("after_time", 55);
    constants();
    uptime_arithmetic();
    walltime_encoding();
    after_not_early();
    after_in_deadline_order();
    many_timers();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
