/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * semaphore.h: counting semaphores.
 */
#ifndef __DISPATCH_SEMAPHORE__
#define __DISPATCH_SEMAPHORE__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/*!
 * @typedef dispatch_semaphore_t
 * A counting semaphore: waiting takes one unit, signalling gives one back.
 */
DISPATCH_DECL(dispatch_semaphore);

/*!
 * @function dispatch_semaphore_create
 * Creates a semaphore holding `value` units (not negative; NULL is returned otherwise).
 * Releasing a semaphore whose count is below its starting value, that is while units
 * are still taken, is a client bug and aborts.
 */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT
DISPATCH_NOTHROW
dispatch_semaphore_t
dispatch_semaphore_create(intptr_t value);

/*!
 * @function dispatch_semaphore_wait
 * Takes one unit, waiting for one to be signalled if none is available, until the
 * deadline. Returns 0 on success, non-zero on timeout.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
intptr_t
dispatch_semaphore_wait(dispatch_semaphore_t dsema, dispatch_time_t timeout);

/*!
 * @function dispatch_semaphore_signal
 * Gives one unit back, waking a waiter if there is one. Returns non-zero if it woke a
 * thread, 0 otherwise.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
intptr_t
dispatch_semaphore_signal(dispatch_semaphore_t dsema);

#endif /* __DISPATCH_SEMAPHORE__ */
