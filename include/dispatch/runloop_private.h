/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * runloop_private.h: libdispatch's private calls for an event loop that owns a thread:
 * Foundation's CFRunLoop uses them to run the main queue on the main thread, and any loop
 * (GLib, a game loop) may do the same. Not included by <dispatch/dispatch.h>.
 *
 * On Linux a "port" is an eventfd (non-blocking, close-on-exec) that the library owns:
 * the loop polls it for reading, reads it (clearing it) when it is readable, then calls
 * the matching callback. A spare wakeup finds nothing to run.
 */
#ifndef __DISPATCH_RUNLOOP_PRIVATE__
#define __DISPATCH_RUNLOOP_PRIVATE__

#include <dispatch/dispatch.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the library up. GrandCentral does that on first use; calling this any number of
 * times, from any thread, is harmless. Foundation calls it when it loads. */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
libdispatch_init(void);

/* The main queue's descriptor: readable while main-queue work is waiting and the main
 * thread is not parked in dispatch_main(). The same descriptor on every call; never close
 * it. The _port_ spelling is the one CFRunLoop uses. */
DISPATCH_EXPORT DISPATCH_NOTHROW
int
_dispatch_get_main_queue_handle_4CF(void);

DISPATCH_EXPORT DISPATCH_NOTHROW
int
_dispatch_get_main_queue_port_4CF(void);

/* On the main thread: runs the main-queue items that were waiting when it was called, in
 * order, each once, with the main queue as the current queue. Items queued meanwhile make
 * the descriptor readable again. Inside a main-queue item (a nested run loop) it does
 * nothing. `msg` is unused on Linux. */
DISPATCH_EXPORT DISPATCH_NOTHROW
void
_dispatch_main_queue_callback_4CF(void *msg);

/* A serial queue that only the thread running a loop drains: submit to it (or target it)
 * from anywhere; its descriptor becomes readable; the loop's thread calls
 * _dispatch_runloop_root_queue_perform_4CF() to run one item. `flags` must be 0 (anything
 * else returns NULL). Release it with dispatch_release(). */
DISPATCH_EXPORT DISPATCH_MALLOC DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_queue_t
_dispatch_runloop_root_queue_create_4CF(const char *label, unsigned long flags);

/* Runs the queue's first item on the calling thread, the loop's; returns true when more
 * items are waiting. Only the loop's thread may call it. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
bool
_dispatch_runloop_root_queue_perform_4CF(dispatch_queue_t queue);

/* Makes the queue's descriptor readable, waking its loop. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
void
_dispatch_runloop_root_queue_wakeup_4CF(dispatch_queue_t queue);

/* The queue's descriptor (an eventfd the queue owns and closes when it goes away). */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
int
_dispatch_runloop_root_queue_get_port_4CF(dispatch_queue_t queue);

#ifdef __cplusplus
}
#endif

#endif /* __DISPATCH_RUNLOOP_PRIVATE__ */
