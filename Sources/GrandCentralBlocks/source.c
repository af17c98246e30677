// Block entry points of source.h (see shim.h). The source keeps a copy of each handler
// block, runs it with gc_block_invoke for every event, and releases it when the handler
// is replaced, cleared, or dropped after the cancel handler ran.
#include "shim.h"

static void gc_block_release(void *context)
{
	Block_release((dispatch_block_t)context);
}

static void gc_source_set_block(dispatch_source_t source, gc_source_handler_kind_t kind, bool mandatory,
		dispatch_block_t handler, const char *function)
{
	void *copy = handler ? gc_block_copy(handler, function) : NULL;
	gc_source_set_block_handler(source, kind, mandatory, copy, gc_block_invoke, gc_block_release);
}

void dispatch_source_set_event_handler(dispatch_source_t source, dispatch_block_t handler)
{
	gc_source_set_block(source, GC_SOURCE_HANDLER_EVENT, false, handler, "dispatch_source_set_event_handler");
}

void dispatch_source_set_cancel_handler(dispatch_source_t source, dispatch_block_t handler)
{
	gc_source_set_block(source, GC_SOURCE_HANDLER_CANCEL, false, handler, "dispatch_source_set_cancel_handler");
}

void dispatch_source_set_registration_handler(dispatch_source_t source, dispatch_block_t handler)
{
	gc_source_set_block(source, GC_SOURCE_HANDLER_REGISTRATION, false, handler, "dispatch_source_set_registration_handler");
}

void dispatch_source_set_mandatory_cancel_handler(dispatch_source_t source, dispatch_block_t handler)
{
	gc_source_set_block(source, GC_SOURCE_HANDLER_CANCEL, true, handler,
			"dispatch_source_set_mandatory_cancel_handler");
}
