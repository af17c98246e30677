// pipeline_blocks.c: the pipeline of pipeline_f.c, written with blocks, the way most GCD
// code is written.
//
//   1. fan-out   eight chunks of a prime count run on the global queue, tracked by a group;
//                each worker records its result through a serial isolation queue that
//                guards the shared tally (__block variables only touched on that queue);
//   2. notify    when the group is empty, the main queue reads the tally back with
//                dispatch_sync and checks it;
//   3. apply     dispatch_apply fills an array in parallel;
//   4. after     dispatch_after fires a timer on the main queue, which checks the delay and
//                ends the program with exit().
// main() hands its thread to dispatch_main(), which never returns.
//
// Build: clang -fblocks pipeline_blocks.c $(pkg-config --cflags --libs grandcentral)
#define _POSIX_C_SOURCE 200809L   // clock_gettime under -std=c11
#include <dispatch/dispatch.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef __BLOCKS__
#error "pipeline_blocks.c uses blocks: compile it with clang -fblocks"
#endif

#define LIMIT 200000u     // count primes below this
#define CHUNKS 8u
#define SQUARES 1000u
#define DELAY_MS 100

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "pipeline_blocks: FAILED: %s\n", what);
        failures++;
    }
}

static unsigned count_primes(unsigned begin, unsigned end) {
    unsigned n = 0;
    for (unsigned i = begin; i < end; i++) {
        int prime = i >= 2;
        for (unsigned d = 2; prime && d * d <= i; d++)
            if (i % d == 0) prime = 0;
        n += (unsigned)prime;
    }
    return n;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void) {
    dispatch_queue_t isolation = dispatch_queue_create("example.tally", DISPATCH_QUEUE_SERIAL);
    dispatch_queue_t global = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
    dispatch_group_t group = dispatch_group_create();

    // The shared tally: read and written only on `isolation`, so it needs no lock.
    __block unsigned primes = 0, chunks_done = 0;

    // 1. fan-out
    for (unsigned i = 0; i < CHUNKS; i++) {
        unsigned begin = LIMIT / CHUNKS * i;
        unsigned end = i + 1 == CHUNKS ? LIMIT : LIMIT / CHUNKS * (i + 1);
        dispatch_group_async(group, global, ^{
            unsigned n = count_primes(begin, end);
            dispatch_async(isolation, ^{
                primes += n;
                chunks_done++;
            });
        });
    }

    // 2. notify: the group is empty, so every write is already on the isolation queue,
    // ahead of the synchronous read below.
    dispatch_group_notify(group, dispatch_get_main_queue(), ^{
        __block unsigned seen_primes = 0, seen_chunks = 0;
        dispatch_sync(isolation, ^{
            seen_primes = primes;
            seen_chunks = chunks_done;
        });
        unsigned expected = count_primes(0, LIMIT);
        printf("pipeline_blocks: fan-out: %u chunks on the global queue counted %u primes "
               "below %u (serial check: %u)\n", seen_chunks, seen_primes, LIMIT, expected);
        check(seen_chunks == CHUNKS, "every chunk reported through the isolation queue");
        check(seen_primes == expected, "parallel prime count matches the serial one");

        // 3. apply
        uint64_t *squares = calloc(SQUARES, sizeof *squares);
        dispatch_apply(SQUARES, global, ^(size_t k) {
            squares[k] = (uint64_t)k * k;
        });
        uint64_t sum = 0;
        for (unsigned k = 0; k < SQUARES; k++) sum += squares[k];
        free(squares);
        uint64_t n = SQUARES, expected_sum = (n - 1) * n * (2 * n - 1) / 6;
        printf("pipeline_blocks: apply: %u squares computed in parallel, sum %llu (expected %llu)\n",
               SQUARES, (unsigned long long)sum, (unsigned long long)expected_sum);
        check(sum == expected_sum, "dispatch_apply ran every index exactly once");

        // 4. after, then exit
        double armed = now_ms();
        dispatch_after(dispatch_time(DISPATCH_TIME_NOW, DELAY_MS * (int64_t)NSEC_PER_MSEC),
                       dispatch_get_main_queue(), ^{
            double waited = now_ms() - armed;
            printf("pipeline_blocks: after: the main-queue timer fired after %.1f ms "
                   "(asked for %d ms)\n", waited, DELAY_MS);
            check(waited >= DELAY_MS - 1, "dispatch_after did not fire early");
            if (failures) {
                printf("pipeline_blocks: %d check(s) failed\n", failures);
                exit(1);
            }
            printf("pipeline_blocks: all checks passed\n");
            exit(0);   // dispatch_main() never returns: a main-queue block ends the program
        });
    });
    dispatch_release(group);   // the pending notify keeps what it needs alive

    dispatch_main();
}
