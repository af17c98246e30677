// fanout-openmp.c: the fan-out row's yardstick (bench/run.sh). The same work as bench.c's
// group_async case, the way a C programmer would write it without dispatch: one thread
// creates 1,000,000 OpenMP tasks that each bump a shared counter, then waits for them all
// (`omp taskwait`), on as many threads as the machine has CPUs (libgomp's default, as the
// pool's). Prints nanoseconds per task. Built by run.sh with gcc -fopenmp (libgomp ships
// with gcc); libgomp may run a task at once on the creating thread when its queue is long
// (task throttling): that is part of what OpenMP's number measures.
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static atomic_uint_fast64_t count;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void bump(void) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); }

static void fan_out(uint64_t n) {
#pragma omp parallel
#pragma omp single
    {
        for (uint64_t i = 0; i < n; i++) {
#pragma omp task
            bump();
        }
#pragma omp taskwait
    }
}

int main(void) {
    const uint64_t n = 1000000;
    fan_out(100000);                                        // warm-up: the team's threads
    atomic_store(&count, 0);
    uint64_t t0 = now_ns();
    fan_out(n);
    uint64_t t1 = now_ns();
    if (atomic_load(&count) != n) {
        fprintf(stderr, "fanout-openmp: not every task ran\n");
        return 2;
    }
    printf("%.4f\n", (double)(t1 - t0) / (double)n);
    return 0;
}
