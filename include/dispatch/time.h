/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * time.h: dispatch_time_t, the deadline type every timed call takes.
 *
 * The encoding is libdispatch's, because programs store and compare these values:
 * 0 is "now", ~0 is "forever", ~1 is "now on the wall clock", a value below 2^63 is a
 * CLOCK_MONOTONIC instant in nanoseconds, and a wall-clock (CLOCK_REALTIME) instant is
 * stored negated, so it has bit 63 set. Treat the values as opaque and build them with
 * dispatch_time() and dispatch_walltime().
 */
#ifndef __DISPATCH_TIME__
#define __DISPATCH_TIME__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

#include <stdint.h>

/* Other headers (and libdispatch's) may define these too; ours win, with equal values. */
#undef NSEC_PER_SEC
#undef NSEC_PER_MSEC
#undef NSEC_PER_USEC
#undef USEC_PER_SEC
#define NSEC_PER_SEC 1000000000ull
#define NSEC_PER_MSEC 1000000ull
#define NSEC_PER_USEC 1000ull
#define USEC_PER_SEC 1000000ull

struct timespec;

/*!
 * @typedef dispatch_time_t
 * A deadline, encoded as described at the top of this file.
 */
typedef uint64_t dispatch_time_t;

/* The current instant, resolved when the call that receives it runs. */
#define DISPATCH_TIME_NOW (0ull)
/* A deadline that never arrives: wait without a timeout. */
#define DISPATCH_TIME_FOREVER (~0ull)
/* The current wall-clock instant; pass it as `when` to dispatch_time() to get a deadline
 * that follows changes to the system clock. */
#define DISPATCH_WALLTIME_NOW (~1ull)

/*!
 * @function dispatch_time
 * Returns `when` moved by `delta` nanoseconds (negative moves it earlier). `when` keeps
 * its clock: DISPATCH_TIME_NOW and monotonic values give a monotonic deadline,
 * wall-clock values and DISPATCH_WALLTIME_NOW a wall-clock one. DISPATCH_TIME_FOREVER
 * stays forever, and a result past the encodable range saturates to it.
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_time_t
dispatch_time(dispatch_time_t when, int64_t delta);

/*!
 * @function dispatch_walltime
 * Returns a wall-clock deadline: the time in `when` (or the current time if `when` is
 * NULL) plus `delta` nanoseconds. Such a deadline moves with changes to the system clock.
 */
DISPATCH_EXPORT DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_time_t
dispatch_walltime(const struct timespec *when, int64_t delta);

#endif /* __DISPATCH_TIME__ */
