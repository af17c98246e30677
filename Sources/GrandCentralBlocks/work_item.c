// Work-item blocks: dispatch_block_create and the calls that wait on, observe and
// cancel what it returns.
//
// A work item is a real heap block whose captured data is its state: the client's block,
// a private dispatch group, the flags and an atomic state word. The group is entered
// when the work item is created and left exactly once, when the item "finishes": after
// its first run completes (or is skipped because it was cancelled), or when its last
// reference is released without it ever having run. dispatch_block_wait is then
// dispatch_group_wait on that group and dispatch_block_notify is dispatch_group_notify.
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
//
// Rules (libdispatch's, checked against the toolchain's libdispatch): a work item may
// run any number of times, or be waited on once and run once. Waiting twice, waiting
// after it ran twice, or running it again after a wait are client bugs. A wait that
// times out does not count: the block may be waited on again.
#include "shim.h"

#include <stdatomic.h>
#include <stdint.h>

// MARK: - Layout

// Bits of gc_work_item.state.
enum {
	GC_WORK_ITEM_CANCELLED = 1u << 0, // dispatch_block_cancel was called
	GC_WORK_ITEM_WAITING = 1u << 1,   // a dispatch_block_wait is in progress
	GC_WORK_ITEM_WAITED = 1u << 2,    // a dispatch_block_wait returned 0
};

// Flags dispatch_block_create accepts: the six public ones, and two more bits that
// libdispatch reserves for its private API and accepts (and that mean nothing here).
#define GC_WORK_ITEM_VALID_FLAGS 0xfful

struct gc_work_item {
	struct gc_block_header header;

	// Written at creation, then only read.
	dispatch_block_t body;           // the client's block, copied; released on dispose
	dispatch_group_t group;          // entered at creation; left once, by gc_work_item_finish
	dispatch_block_flags_t flags;
	dispatch_qos_class_t qos_class;  // recorded; GrandCentral does not apply block QoS
	int relative_priority;

	// Shared between the threads that run, wait on and cancel the item. Every access is
	// sequentially consistent: the run-twice-and-wait check needs a thread that bumps
	// `runs` and a thread that sets WAITING to see at least one of each other's writes
	// (a store-load pattern, which acquire/release alone does not order).
	_Atomic uint32_t state;          // GC_WORK_ITEM_* bits
	_Atomic uint64_t runs;           // invocations started
	_Atomic uint32_t finished;       // 1 once the group has been left
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

/// Leaves the group, the first time only: the item has finished.
static void gc_work_item_finish(struct gc_work_item *item)
{
	if (atomic_exchange(&item->finished, 1u) == 0) dispatch_group_leave(item->group);
}

static void gc_work_item_copy(void *destination, const void *source)
{
	// The stack original is abandoned after its single copy (gc_work_item_create), so
	// the bitwise copy the runtime already made transfers ownership of body and group.
	(void)destination;
	(void)source;
}

static void gc_work_item_dispose(const void *block)
{
	struct gc_work_item *item = (struct gc_work_item *)(uintptr_t)block;
	// Released without having run: it will never run now, so it has finished.
	// Waiters hold a reference while they wait, so none can be waiting at this point;
	// pending notifications fire.
	gc_work_item_finish(item);
	dispatch_release(item->group);
	Block_release(item->body);
}

void gc_work_item_invoke(void *block)
{
	struct gc_work_item *item = (struct gc_work_item *)block;
	uint64_t earlier_runs = atomic_fetch_add(&item->runs, 1);
	uint32_t state = atomic_load(&item->state);
	if (earlier_runs > 0 && (state & (GC_WORK_ITEM_WAITING | GC_WORK_ITEM_WAITED)) != 0) {
		gc_client_bug("dispatch_block_wait",
				"a work-item block that is waited on may not run more than once");
	}
	if ((state & GC_WORK_ITEM_CANCELLED) == 0) item->body();
	gc_work_item_finish(item);
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
		.group = dispatch_group_create(),
		.flags = flags,
		.qos_class = qos_class,
		.relative_priority = relative_priority,
	};
	if (original.group == NULL) gc_shim_out_of_memory(function);
	atomic_init(&original.state, 0u);
	atomic_init(&original.runs, 0);
	atomic_init(&original.finished, 0u);
	dispatch_group_enter(original.group);

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
	uint32_t state = atomic_fetch_or(&item->state, GC_WORK_ITEM_WAITING);
	if ((state & (GC_WORK_ITEM_WAITING | GC_WORK_ITEM_WAITED)) != 0) {
		gc_client_bug("dispatch_block_wait",
				"a work-item block may not be waited on more than once");
	}
	if (atomic_load(&item->runs) > 1) {
		gc_client_bug("dispatch_block_wait",
				"a work-item block that ran more than once may not be waited on");
	}

	// Hold a reference while waiting: the item, and its group, then outlive the wait
	// even if the client's own reference goes away on another thread meanwhile.
	Block_copy(block);
	intptr_t result = dispatch_group_wait(item->group, timeout);
	// Set WAITED before clearing WAITING, so that a second run in between is caught.
	if (result == 0) atomic_fetch_or(&item->state, GC_WORK_ITEM_WAITED);
	atomic_fetch_and(&item->state, ~(uint32_t)GC_WORK_ITEM_WAITING);
	Block_release(block);
	return result;
}

void dispatch_block_notify(dispatch_block_t block, dispatch_queue_t queue,
		dispatch_block_t notification_block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_notify");
	gc_check_queue_and_block(queue, notification_block, "dispatch_block_notify");
	// The group outlives this call: the caller holds the item, which holds the group.
	dispatch_group_notify(item->group, queue, notification_block);
}

void dispatch_block_cancel(dispatch_block_t block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_cancel");
	atomic_fetch_or(&item->state, GC_WORK_ITEM_CANCELLED);
}

intptr_t dispatch_block_testcancel(dispatch_block_t block)
{
	struct gc_work_item *item = gc_work_item_checked(block, "dispatch_block_testcancel");
	return (atomic_load(&item->state) & GC_WORK_ITEM_CANCELLED) != 0;
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
