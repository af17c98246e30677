// Block entry points of data.h (see shim.h): dispatch_data_create and dispatch_data_apply.
// The destructor markers (DISPATCH_DATA_DESTRUCTOR_FREE/_MUNMAP) are passed on by value to
// dispatch_data_create_f; any other destructor block is copied and later run, and
// released, by the trampoline on the destructor queue.
#include "shim.h"

/// Exports/Data.swift: dispatch_data_create with `function(context)` as the destructor.
dispatch_data_t _gc_data_create_with_destructor(const void *buffer, size_t size,
		dispatch_queue_t queue, dispatch_function_t function, void *context);

dispatch_data_t dispatch_data_create(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_block_t destructor)
{
	if (destructor == DISPATCH_DATA_DESTRUCTOR_DEFAULT) {
		return dispatch_data_create_f(buffer, size, queue, NULL);
	}
	if (destructor == DISPATCH_DATA_DESTRUCTOR_FREE) {
		return dispatch_data_create_f(buffer, size, queue, DISPATCH_DATA_DESTRUCTOR_FREE_F);
	}
	if (destructor == DISPATCH_DATA_DESTRUCTOR_MUNMAP) {
		return dispatch_data_create_f(buffer, size, queue, DISPATCH_DATA_DESTRUCTOR_MUNMAP_F);
	}
	if (destructor == DISPATCH_DATA_DESTRUCTOR_NONE) {
		return dispatch_data_create_f(buffer, size, queue, DISPATCH_DATA_DESTRUCTOR_NONE_F);
	}
	void *copy = gc_block_copy(destructor, "dispatch_data_create");
	return _gc_data_create_with_destructor(buffer, size, queue, gc_block_invoke_and_release, copy);
}

static bool gc_data_apply_block(void *context, dispatch_data_t region, size_t offset,
		const void *buffer, size_t size)
{
	return ((dispatch_data_applier_t)context)(region, offset, buffer, size);
}

bool dispatch_data_apply(dispatch_data_t data, dispatch_data_applier_t applier)
{
	if (applier == NULL) gc_client_bug("dispatch_data_apply", "applier is NULL");
	return dispatch_data_apply_f(data, (void *)applier, gc_data_apply_block);
}
