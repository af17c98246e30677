// pipeline_f.c: Grand Central Dispatch from plain C, with the function (_f) API.
//
// A small pipeline, the way GCD programs are usually shaped:
//   1. fan-out   eight chunks of a prime count run on the global queue, tracked by a group;
//                each worker records its result through a serial *isolation queue* that
//                guards the shared tally (writes are dispatch_async_f, reads dispatch_sync_f);
//   2. notify    when the group is empty, the main queue reads the tally and checks it;
//   3. apply     dispatch_apply_f fills an array in parallel;
//   4. after     dispatch_after_f fires a timer on the main queue, which checks the delay
//                and ends the program with exit().
// main() hands its thread to dispatch_main(), which never returns.
//
// Build: gcc -std=c11 -Wall -Wextra pipeline_f.c $(pkg-config --cflags --libs grandcentral)
#define _POSIX_C_SOURCE 200809L   // clock_gettime under -std=c11
#include <dispatch/dispatch.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LIMIT 200000u     // count primes below this
#define CHUNKS 8u
#define SQUARES 1000u
#define DELAY_MS 100

// The shared tally. Only ever touched on `isolation` (a serial queue), so it needs no lock.
struct tally {
    unsigned primes;
    unsigned chunks_done;
};

struct chunk {
    unsigned begin, end;   // [begin, end)
    unsigned primes;       // written by the worker, then handed to the isolation queue
};

static dispatch_queue_t isolation;
static struct tally tally;
static struct chunk chunks[CHUNKS];
static uint64_t squares[SQUARES];
static struct timespec timer_armed;
static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "pipeline_f: FAILED: %s\n", what);
        failures++;
    }
}

static int is_prime(unsigned n) {
    if (n < 2) return 0;
    for (unsigned d = 2; d * d <= n; d++)
        if (n % d == 0) return 0;
    return 1;
}

static double ms_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e3 + (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

// --- 1. fan-out ---------------------------------------------------------------------

// Runs on the isolation queue: the only place the tally is written.
static void record_chunk(void *context) {
    struct chunk *c = context;
    tally.primes += c->primes;
    tally.chunks_done++;
}

// Runs on the global queue, several at once.
static void count_chunk(void *context) {
    struct chunk *c = context;
    unsigned n = 0;
    for (unsigned i = c->begin; i < c->end; i++) n += (unsigned)is_prime(i);
    c->primes = n;
    dispatch_async_f(isolation, c, record_chunk);
}

// --- 2. notify: read the tally back --------------------------------------------------

static void read_tally(void *context) {
    *(struct tally *)context = tally;
}

static void stage_apply(void *context);

static void fan_out_done(void *context) {
    (void)context;
    // A synchronous read on the serial queue runs after every write enqueued before it.
    struct tally seen;
    dispatch_sync_f(isolation, &seen, read_tally);
    unsigned expected = 0;
    for (unsigned i = 0; i < LIMIT; i++) expected += (unsigned)is_prime(i);
    printf("pipeline_f: fan-out: %u chunks on the global queue counted %u primes below %u "
           "(serial check: %u)\n", seen.chunks_done, seen.primes, LIMIT, expected);
    check(seen.chunks_done == CHUNKS, "every chunk reported through the isolation queue");
    check(seen.primes == expected, "parallel prime count matches the serial one");
    stage_apply(NULL);
}

// --- 3. apply ------------------------------------------------------------------------

static void square(void *context, size_t i) {
    uint64_t *out = context;
    out[i] = (uint64_t)i * i;
}

static void stage_after(void);

static void stage_apply(void *context) {
    (void)context;
    dispatch_apply_f(SQUARES, dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0),
                     squares, square);
    uint64_t sum = 0;
    for (unsigned i = 0; i < SQUARES; i++) sum += squares[i];
    uint64_t n = SQUARES, expected = (n - 1) * n * (2 * n - 1) / 6;
    printf("pipeline_f: apply: %u squares computed in parallel, sum %llu (expected %llu)\n",
           SQUARES, (unsigned long long)sum, (unsigned long long)expected);
    check(sum == expected, "dispatch_apply_f ran every index exactly once");
    stage_after();
}

// --- 4. after, then exit ---------------------------------------------------------------

static void timer_fired(void *context) {
    (void)context;
    double waited = ms_since(&timer_armed);
    printf("pipeline_f: after: the main-queue timer fired after %.1f ms (asked for %d ms)\n",
           waited, DELAY_MS);
    check(waited >= DELAY_MS - 1, "dispatch_after_f did not fire early");
    if (failures) {
        printf("pipeline_f: %d check(s) failed\n", failures);
        exit(1);
    }
    printf("pipeline_f: all checks passed\n");
    exit(0);   // dispatch_main() never returns: a main-queue item ends the program
}

static void stage_after(void) {
    clock_gettime(CLOCK_MONOTONIC, &timer_armed);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, DELAY_MS * (int64_t)NSEC_PER_MSEC),
                     dispatch_get_main_queue(), NULL, timer_fired);
}

int main(void) {
    isolation = dispatch_queue_create("example.tally", DISPATCH_QUEUE_SERIAL);
    dispatch_queue_t global = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
    dispatch_group_t group = dispatch_group_create();
    for (unsigned i = 0; i < CHUNKS; i++) {
        chunks[i].begin = LIMIT / CHUNKS * i;
        chunks[i].end = i + 1 == CHUNKS ? LIMIT : LIMIT / CHUNKS * (i + 1);
        dispatch_group_async_f(group, global, &chunks[i], count_chunk);
    }
    dispatch_group_notify_f(group, dispatch_get_main_queue(), NULL, fan_out_done);
    dispatch_release(group);   // the pending notify keeps what it needs alive
    dispatch_main();
}
