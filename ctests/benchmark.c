// dispatch_benchmark_f: calls the function `count` times and returns the average
// nanoseconds per call. The result must be plausible: not zero, and at least as long as
// the time the function is known to spin (a lower bound that cannot flake), with a very
// loose upper bound. This is not a speed test.
#include "check.h"

static atomic_long calls;

static void spin_20us(void *context) {
    (void)context;
    atomic_fetch_add(&calls, 1);
    busy_wait_ns(20000);
}

static volatile long sink;

// The toolchain's libdispatch returns nonsense here on Linux (~0 for a 20 us function,
// its loop-cost calibration goes wrong), so the reference build only checks call counts.
#ifdef GC_REFERENCE_LIBDISPATCH
#define CHECK_PLAUSIBLE(cond, ...) do { if (!(cond)) printf("   (libdispatch: implausible, not checked)\n"); } while (0)
#else
#define CHECK_PLAUSIBLE(cond, ...) CHECKF(cond, __VA_ARGS__)
#endif

static void tiny(void *context) {
    (void)context;
    sink++;
}

int main(void) {
    check_start("benchmark", 50);

    check_section("dispatch_benchmark_f averages a 20 us function at 20 us or more");
    atomic_store(&calls, 0);
    uint64_t average = dispatch_benchmark_f(500, NULL, spin_20us);
    printf("   %llu ns per call\n", (unsigned long long)average);
    CHECK_EQ(atomic_load(&calls), 500);
    CHECK_PLAUSIBLE(average >= 19000, "average %llu ns for a function that spins 20 us", (unsigned long long)average);
    CHECK_PLAUSIBLE(average < 1000000000ull, "average %llu ns is implausible", (unsigned long long)average);

    check_section("a tiny function reports a small average (it may round to 0)");
    sink = 0;
    uint64_t tiny_average = dispatch_benchmark_f(100000, NULL, tiny);
    printf("   %llu ns per call\n", (unsigned long long)tiny_average);
    CHECK_EQ(sink, 100000);
    CHECK_PLAUSIBLE(tiny_average < 1000000ull, "average %llu ns for an increment is implausible", (unsigned long long)tiny_average);

#ifdef __BLOCKS__
    check_section("blocks: dispatch_benchmark");
    __block long block_calls = 0;
    uint64_t block_average = dispatch_benchmark(200, ^{
        block_calls++;
        busy_wait_ns(10000);
    });
    printf("   %llu ns per call\n", (unsigned long long)block_average);
    CHECK_EQ(block_calls, 200);
    CHECK_PLAUSIBLE(block_average >= 9000 && block_average < 1000000000ull, "average %llu ns for a 10 us block",
                    (unsigned long long)block_average);
#endif
    check_pass();
    return 0;
}
