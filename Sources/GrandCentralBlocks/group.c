// Block entry points of group.h (see shim.h). A barrier work item keeps its barrier: the
// flags travel with the item to the engine, which runs it as a barrier on its queue.
#include "shim.h"

void dispatch_group_async(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block)
{
	if (group == NULL) gc_client_bug("dispatch_group_async", "group is NULL");
	gc_check_queue_and_block(queue, block, "dispatch_group_async");
	void *context = gc_block_copy(block, "dispatch_group_async");
	gc_group_async_flags_f(group, queue, context, gc_block_invoke_and_release,
			gc_block_submit_flags(block));
}

void dispatch_group_notify(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block)
{
	if (group == NULL) gc_client_bug("dispatch_group_notify", "group is NULL");
	gc_check_queue_and_block(queue, block, "dispatch_group_notify");
	void *context = gc_block_copy(block, "dispatch_group_notify");
	gc_group_notify_flags_f(group, queue, context, gc_block_invoke_and_release,
			gc_block_submit_flags(block));
}
