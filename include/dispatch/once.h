/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * once.h: run a piece of initialization exactly once per process.
 *
 * The predicate is a dispatch_once_t that starts at zero (a static or global). The
 * library sets it to ~0l once the initializer has returned, and never changes it
 * again. That lets the common case, "already done", be decided inline without calling
 * into the library: dispatch_once() and dispatch_once_f() are macros for the inline
 * functions below, which call the library only while the predicate is not ~0l.
 *
 * Why a plain load suffices on x86 and s390x: their loads are not reordered with later
 * loads, and the library publishes ~0l with a release store after the initializer's
 * writes, so a thread that reads ~0l also sees everything the initializer wrote. Only the
 * compiler has to be kept from hoisting the caller's later reads above the check, which
 * is what dispatch_compiler_barrier() does. Other architectures (ARM, POWER, RISC-V) can
 * reorder loads, so there the check is an acquire load, which costs an ordered load.
 */
#ifndef __DISPATCH_ONCE__
#define __DISPATCH_ONCE__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

/*!
 * @typedef dispatch_once_t
 * The predicate of dispatch_once(): static or global storage initialized to zero.
 * Do not write to it yourself.
 */
typedef long dispatch_once_t;

#if defined(__x86_64__) || defined(__i386__) || defined(__s390x__)
#define DISPATCH_ONCE_INLINE_FASTPATH 1
#define __DISPATCH_ONCE_LOAD(predicate) (*(predicate))
#elif defined(__ATOMIC_ACQUIRE)
#define DISPATCH_ONCE_INLINE_FASTPATH 1
#define __DISPATCH_ONCE_LOAD(predicate) __atomic_load_n((predicate), __ATOMIC_ACQUIRE)
#else
#define DISPATCH_ONCE_INLINE_FASTPATH 0
#endif

#ifdef __BLOCKS__
/*!
 * @function dispatch_once
 * Runs the block if and only if no call with the same predicate has run one before.
 * Concurrent callers wait until the first one's block has returned; every caller
 * returns only after the block has run. Calling it again with the same predicate from
 * inside the block deadlocks.
 */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
dispatch_once(dispatch_once_t *predicate, DISPATCH_NOESCAPE dispatch_block_t block);

#if DISPATCH_ONCE_INLINE_FASTPATH
DISPATCH_INLINE DISPATCH_ALWAYS_INLINE DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
_dispatch_once(dispatch_once_t *predicate, DISPATCH_NOESCAPE dispatch_block_t block)
{
	if (DISPATCH_EXPECT(__DISPATCH_ONCE_LOAD(predicate), ~0l) != ~0l) {
		dispatch_once(predicate, block);
	} else {
		dispatch_compiler_barrier();
	}
	DISPATCH_COMPILER_CAN_ASSUME(*predicate == ~0l);
}
#undef dispatch_once
#define dispatch_once _dispatch_once
#endif
#endif /* __BLOCKS__ */

/*!
 * @function dispatch_once_f
 * dispatch_once() calling function(context).
 */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
dispatch_once_f(dispatch_once_t *predicate, void *context, dispatch_function_t function);

#if DISPATCH_ONCE_INLINE_FASTPATH
DISPATCH_INLINE DISPATCH_ALWAYS_INLINE DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
void
_dispatch_once_f(dispatch_once_t *predicate, void *context, dispatch_function_t function)
{
	if (DISPATCH_EXPECT(__DISPATCH_ONCE_LOAD(predicate), ~0l) != ~0l) {
		dispatch_once_f(predicate, context, function);
	} else {
		dispatch_compiler_barrier();
	}
	DISPATCH_COMPILER_CAN_ASSUME(*predicate == ~0l);
}
#undef dispatch_once_f
#define dispatch_once_f _dispatch_once_f
#endif

#endif /* __DISPATCH_ONCE__ */
