/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * benchmark.h: a quick way to time a piece of code.
 */
#ifndef __DISPATCH_BENCHMARK__
#define __DISPATCH_BENCHMARK__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

#ifdef __BLOCKS__
/*!
 * @function dispatch_benchmark
 * Runs the block `count` times on the calling thread and returns the average time of
 * one run in nanoseconds, less the cost of the timing itself. A rough guide for
 * development, not a substitute for a profiler.
 */
DISPATCH_EXPORT DISPATCH_NONNULL2 DISPATCH_NOTHROW
uint64_t
dispatch_benchmark(size_t count, DISPATCH_NOESCAPE dispatch_block_t block);
#endif

/*!
 * @function dispatch_benchmark_f
 * dispatch_benchmark() calling func(context).
 */
DISPATCH_EXPORT DISPATCH_NONNULL3 DISPATCH_NOTHROW
uint64_t
dispatch_benchmark_f(size_t count, void *context, dispatch_function_t func);

#endif /* __DISPATCH_BENCHMARK__ */
