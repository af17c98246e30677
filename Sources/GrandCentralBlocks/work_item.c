// Work-item blocks: dispatch_block_create and the calls that wait on, observe and
// cancel what it returns.
//
// A work item is a real heap block whose captured data is the client's block, the flags
// and a retained WorkItemCoreBox (Sources/GrandCentral/Runtime/WorkItemCore.swift, reached
// through the gc_work_item_core_* calls of GrandCentralExports/WorkItem.swift). The core
// is the one implementation of what a work item does, shared with the Swift API's
// DispatchWorkItem: running once or many times, waiting once, cancelling, notifying, and
// the client-bug rules. This file only builds the block, checks its arguments and
// forwards.
//
// How the block is built, and why. A block literal written in C cannot run code when it
// is copied to the heap or freed, unless it captures an Objective-C object, another block
// or a __block variable, none of which can carry our own cleanup. Two ways out:
//
//  - compile this file as C++ and capture a C++ object, whose copy constructor and
//    destructor the compiler calls from the block's copy/dispose helpers (libdispatch's
//    way). That brings C++ into a library linked by swiftc, ties us to where clang places
//    the capture inside the block (we must find it again from a block pointer), and
//    needs a reference block made at run time to learn the literal's invoke function.
//  - build the block by hand, following the Block ABI that every blocks compiler and
//    runtime implement: a header (isa, flags, invoke, descriptor) followed by our data,
//    with a descriptor that has copy and dispose helpers.
//
// We build it by hand. The layout is then ours (struct gc_work_item), the invoke
// function is an ordinary C function, so recognising a work item is one pointer compare
// with no set-up, and there is no C++ in the library. The block starts life as a stack
// block and goes to the heap through Block_copy, so the runtime allocates it and owns the
// reference count in its own format (compiler-rt's and Apple's runtimes count
// differently); we never touch those bits. The stack original is never used again after
// that one copy, so its contents simply move: the copy helper has nothing to do, and the
// dispose helper runs once, when the runtime frees the heap block.
#include "shim.h"

#include <stdint.h>

// MARK: - The engine's core (GrandCentralExports/WorkItem.swift)

/// A new WorkItemCoreBox, retained once for the block.
void *gc_work_item_core_create(void);
/// Drops the block's reference; the last one finishes an item that never ran.
void gc_work_item_core_release(void *core);
/// One run: the contract's checks, then `function(context)` unless cancelled, then finish.
void gc_work_item_core_run(void *core, dispatch_function_t function, void *context);
/// Waits for the item to finish: 0 when it did, non-zero on timeout.
intptr_t gc_work_item_core_wait(void *core, dispatch_time_t timeout);
/// Submits `function(context)` to `queue` (flags: GC_SUBMIT_BARRIER) once it finished.
void gc_work_item_core_notify(void *core, dispatch_queue_t queue, void *context,
		dispatch_function_t function, unsigned long flags);
void gc_work_item_core_cancel(void *core);
intptr_t gc_work_item_core_testcancel(void *core);

// MARK: - Layout

// Flags dispatch_block_create accepts: the six public ones, and two more bits that
// libdispatch reserves for its private API and accepts (and that mean nothing here).
#define GC_WORK_ITEM_VALID_FLAGS 0xfful

struct gc_work_item {
	struct gc_block_header header;

	// Written at creation, then only read.
	dispatch_block_t body;           // the client's block, copied; released on dispose
	void *core;                      // the WorkItemCoreBox, retained; released on dispose
	dispatch_block_flags_t flags;
	dispatch_qos_class_t qos_class;  // recorded; GrandCentral does not apply block QoS
	int relative_priority;
};

static void gc_work_item_copy(void *destination, const void *source);
static void gc_work_item_dispose(const void *block);

static const struct gc_block_descriptor gc_work_item_descriptor = {
	.reserved = 0,
	.size = sizeof(struct gc_work_item),
	.copy = gc_work_item_copy,
	.dispose = gc_work_item_dispose,
	.signature = "v8@?0", // returns void, takes only the block
};

// The runtime's class pointer for blocks on the stack (libBlocksRuntime). Declared here
// rather than taken from Block_private.h, whose contents differ between runtimes.
extern void *_NSConcreteStackBlock[32];

static inline struct gc_work_item *gc_work_item_from_block(dispatch_block_t block)
{
	return (struct gc_work_item *)(void *)block;
}

/// The work item behind `block`, or a client bug if `block` is NULL or not a work item.
static struct gc_work_item *gc_work_item_checked(dispatch_block_t block, const char *function)
{
	if (block == NULL) gc_client_bug(function, "block is NULL");
	struct gc_work_item *item = gc_work_item_from_block(block);
	if (item->header.invoke != gc_work_item_invoke) {
		gc_client_bug(function, "block was not created by dispatch_block_create");
	}
	return item;
}

// MARK: - Life cycle

static void gc_work_item_copy(void *destination, const void *source)
{
	// The stack original is abandoned after its single copy (gc_work_item_create), so
	// the bitwise copy the runtime already made transfers ownership of body and core.
	(void)destination;
	(void)source;
}

static void gc_work_item_dispose(const void *block)
{
	struct gc_work_item *item = (struct gc_work_item *)(uintptr_t)block;
	// Waiters hold a reference to the block while they wait, so none is waiting now; the
	// core finishes an item that never ran when this last reference goes.
	gc_work_item_core_release(item->core);
	Block_release(item->body);
}

void gc_work_item_invoke(void *block)
{
	struct gc_work_item *item = (struct gc_work_item *)block;
	gc_work_item_core_run(item->core, gc_block_invoke, item->body);
}

dispatch_block_flags_t gc_work_item_flags(dispatch_block_t block)
{
	return gc_work_item_from_block(block)->flags;
}

static dispatch_block_t gc_work_item_create(dispatch_block_flags_t flags,
		dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t body,
		const char *function)
{
	struct gc_work_item original = {
		.header = {
			.isa = _NSConcreteStackBlock,
			.flags = GC_BLOCK_HAS_COPY_DISPOSE | GC_BLOCK_HAS_SIGNATURE,
			.reserved = 0,
			.invoke = gc_work_item_invoke,
			.descriptor = &gc_work_item_descriptor,
		},
		.body = gc_block_copy(body, function),
		.core = gc_work_item_core_create(),
		.flags = flags,
		.qos_class = qos_class,
		.relative_priority = relative_priority,
	};

	void *copy = _Block_copy(&original);
	if (copy == NULL) gc_shim_out_of_memory(function);
	return (dispatch_block_t)copy;
}

// MARK: - API

dispatch_block_t dispatch_block_create(dispatch_block_flags_t flags, dispatch_block_t block)
{
	if (block == NULL) gc_client_bug("dispatch_block_create", "block is NULL");
	if ((flags & ~GC_WORK_ITEM_VALID_FLAGS) != 0) return NULL;
	return gc_work_item_create(flags, QOS_CLASS_UNSPECIFIED, 0, block,
			"dispatch_block_create");
}

static bool gc_qos_class_is_valid(dispatch_qos_class_t qos_class, int relative_priority)
{
	if (relative_priority > 0 || relative_priority < QOS_MIN_RELATIVE_PRIORITY) return false;
	switch ((unsigned int)qos_class) {
	case QOS_CLASS_USER_INTERACTIVE:
	case QOS_CLASS_USER_INITIATED:
	case QOS_CLASS_DEFAULT:
	case QOS_CLASS_UTILITY:
	case QOS_CLASS_BACKGROUND:
	case 0x05: // QOS_CLASS_MAINTENANCE, Apple-private; libdispatch accepts it
	case QOS_CLASS_UNSPECIFIED:
		return true;
	default:
		return false;
	}
}

dispatch_block_t dispatch_block_create_with_qos_class(dispatch_block_flags_t flags,
		dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t block)
{
	if (block == NULL) gc_client_bug("dispatch_block_create_with_qos_class", "block is NULL");
	if ((flags & ~GC_WORK_ITEM_VALID_FLAGS) != 0) return NULL;
	if (!gc_qos_class_is_valid(qos_class, relative_priority)) return NULL;
	return gc_work_item_create(flags, qos_class, relative_priority, block,
			"dispatch_block_create_with_qos_class");
}

void dispatch_block_perform(dispatch_block_flags_t flags, dispatch_block_t block)
{
	if (block == NULL) gc_client_bug("dispatch_block_perform", "block is NULL");
	if ((flags & ~GC_WORK_ITEM_VALID_FLAGS) != 0) {
		gc_client_bug("dispatch_block_perform", "flags contain an unknown bit");
	}
	// Running it now is all a work item made, run and released on the spot would do:
	// nobody else holds it, so it cannot be waited on or cancelled. The flags concern
	// how a queue runs the item (barrier, QoS) and have no effect on a direct call.
	block();
}

intptr_t dispatch_block_wait(dispatch_block_t block, dispatch_time_t timeout)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_wait");
	// Hold a reference while waiting: the item, and its core, then outlive the wait
	// even if the client's own reference goes away on another thread meanwhile.
	Block_copy(block);
	intptr_t result = gc_work_item_core_wait(item->core, timeout);
	Block_release(block);
	return result;
}

void dispatch_block_notify(dispatch_block_t block, dispatch_queue_t queue,
		dispatch_block_t notification_block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_notify");
	gc_check_queue_and_block(queue, notification_block, "dispatch_block_notify");
	// The core outlives this call: the caller holds the item, which holds the core.
	gc_work_item_core_notify(item->core, queue, gc_block_copy(notification_block, "dispatch_block_notify"),
			gc_block_invoke_and_release, gc_block_submit_flags(notification_block));
}

void dispatch_block_cancel(dispatch_block_t block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_cancel");
	gc_work_item_core_cancel(item->core);
}

intptr_t dispatch_block_testcancel(dispatch_block_t block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_testcancel");
	return gc_work_item_core_testcancel(item->core);
}

// MARK: - Private calls (private.h)

// libdispatch's way for other runtimes to recognise a block made by dispatch_block_create:
// its invoke function. Every work item here has the same one.
void *const _dispatch_block_special_invoke = (void *)gc_work_item_invoke;

// Vouchers are Darwin's (resource accounting carried across IPC); libdispatch on Linux has
// none, and these take the voucher argument only to ignore it.
dispatch_block_t dispatch_block_create_with_voucher(dispatch_block_flags_t flags, voucher_t voucher,
		dispatch_block_t block)
{
	(void)voucher;
	if (block == NULL) gc_client_bug("dispatch_block_create_with_voucher", "block is NULL");
	if ((flags & ~GC_WORK_ITEM_VALID_FLAGS) != 0) return NULL;
	return gc_work_item_create(flags, QOS_CLASS_UNSPECIFIED, 0, block,
			"dispatch_block_create_with_voucher");
}

dispatch_block_t dispatch_block_create_with_voucher_and_qos_class(dispatch_block_flags_t flags,
		voucher_t voucher, dispatch_qos_class_t qos_class, int relative_priority, dispatch_block_t block)
{
	(void)voucher;
	if (block == NULL) gc_client_bug("dispatch_block_create_with_voucher_and_qos_class", "block is NULL");
	if ((flags & ~GC_WORK_ITEM_VALID_FLAGS) != 0) return NULL;
	if (!gc_qos_class_is_valid(qos_class, relative_priority)) return NULL;
	return gc_work_item_create(flags, qos_class, relative_priority, block,
			"dispatch_block_create_with_voucher_and_qos_class");
}

// libdispatch's internal constructor behind the calls above, exported by its build:
// (flags, voucher, pthread priority, block). Flags outside the public set are
// libdispatch's internal bookkeeping and are dropped; the voucher and the pthread
// priority (a Darwin encoding) are ignored.
dispatch_block_t _dispatch_block_create(dispatch_block_flags_t flags, voucher_t voucher,
		unsigned long priority, dispatch_block_t block)
{
	(void)voucher;
	(void)priority;
	if (block == NULL) gc_client_bug("_dispatch_block_create", "block is NULL");
	return gc_work_item_create(flags & GC_WORK_ITEM_VALID_FLAGS, QOS_CLASS_UNSPECIFIED, 0, block,
			"_dispatch_block_create");
}
