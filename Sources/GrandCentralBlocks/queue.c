// Block entry points of queue.h: each copies the block if it may outlive the call and
// hands it to the `_f` twin with a trampoline (see shim.h). A work item created with
// DISPATCH_BLOCK_BARRIER goes to the barrier twin instead.
#include "shim.h"

void dispatch_async(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_async");
	void *context = gc_block_copy(block, "dispatch_async");
	if (gc_block_is_barrier(block)) {
		dispatch_barrier_async_f(queue, context, gc_block_invoke_and_release);
	} else {
		dispatch_async_f(queue, context, gc_block_invoke_and_release);
	}
}

void dispatch_sync(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_sync");
	if (gc_block_is_barrier(block)) {
		dispatch_barrier_sync_f(queue, (void *)block, gc_block_invoke);
	} else {
		dispatch_sync_f(queue, (void *)block, gc_block_invoke);
	}
}

void dispatch_async_and_wait(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_async_and_wait");
	if (gc_block_is_barrier(block)) {
		dispatch_barrier_async_and_wait_f(queue, (void *)block, gc_block_invoke);
	} else {
		dispatch_async_and_wait_f(queue, (void *)block, gc_block_invoke);
	}
}

void dispatch_barrier_async(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_barrier_async");
	void *context = gc_block_copy(block, "dispatch_barrier_async");
	dispatch_barrier_async_f(queue, context, gc_block_invoke_and_release);
}

void dispatch_barrier_sync(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_barrier_sync");
	dispatch_barrier_sync_f(queue, (void *)block, gc_block_invoke);
}

void dispatch_barrier_async_and_wait(dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_barrier_async_and_wait");
	dispatch_barrier_async_and_wait_f(queue, (void *)block, gc_block_invoke);
}

// dispatch_after has no barrier twin: the flags travel with the item (see shim.h).
void dispatch_after(dispatch_time_t when, dispatch_queue_t queue, dispatch_block_t block)
{
	gc_check_queue_and_block(queue, block, "dispatch_after");
	// The engine drops a FOREVER deadline (it never fires): a copy made for it would never
	// be released. libdispatch returns before copying too.
	if (when == DISPATCH_TIME_FOREVER) return;
	void *context = gc_block_copy(block, "dispatch_after");
	gc_after_flags_f(when, queue, context, gc_block_invoke_and_release,
			gc_block_submit_flags(block));
}

// MARK: - dispatch_apply

static void gc_apply_invoke(void *context, size_t iteration)
{
	((void (^)(size_t))context)(iteration);
}

void dispatch_apply(size_t iterations, dispatch_queue_t queue, void (^block)(size_t))
{
	// queue may be NULL: DISPATCH_APPLY_AUTO.
	if (block == NULL) gc_client_bug("dispatch_apply", "block is NULL");
	dispatch_apply_f(iterations, queue, (void *)block, gc_apply_invoke);
}
