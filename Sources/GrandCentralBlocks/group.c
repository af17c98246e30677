// Block entry points of group.h (see shim.h). A barrier work item keeps its barrier:
// dispatch_group_async submits it with the barrier twin around an explicit enter/leave,
// dispatch_group_notify defers it through a barrier hop (queue.c).
#include "shim.h"

struct gc_group_barrier {
	dispatch_group_t group; // retained until the item has run
	void *block;            // copied
};

static void gc_group_barrier_run(void *context)
{
	struct gc_group_barrier item = *(struct gc_group_barrier *)context;
	free(context);
	gc_block_invoke_and_release(item.block);
	dispatch_group_leave(item.group);
	dispatch_release(item.group);
}

void dispatch_group_async(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block)
{
	if (group == NULL) gc_client_bug("dispatch_group_async", "group is NULL");
	gc_check_queue_and_block(queue, block, "dispatch_group_async");
	void *context = gc_block_copy(block, "dispatch_group_async");
	if (gc_block_is_barrier(block)) {
		struct gc_group_barrier *item = gc_shim_alloc(sizeof *item, "dispatch_group_async");
		item->group = group;
		item->block = context;
		dispatch_retain(group);
		dispatch_group_enter(group);
		dispatch_barrier_async_f(queue, item, gc_group_barrier_run);
	} else {
		dispatch_group_async_f(group, queue, context, gc_block_invoke_and_release);
	}
}

void dispatch_group_notify(dispatch_group_t group, dispatch_queue_t queue,
		dispatch_block_t block)
{
	if (group == NULL) gc_client_bug("dispatch_group_notify", "group is NULL");
	gc_check_queue_and_block(queue, block, "dispatch_group_notify");
	void *context = gc_block_copy(block, "dispatch_group_notify");
	if (gc_block_is_barrier(block)) {
		void *hop = gc_barrier_hop_create(queue, context, "dispatch_group_notify");
		dispatch_group_notify_f(group, dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), hop,
				gc_barrier_hop_run);
	} else {
		dispatch_group_notify_f(group, queue, context, gc_block_invoke_and_release);
	}
}
