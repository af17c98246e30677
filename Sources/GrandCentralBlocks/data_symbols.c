// The data symbols the public header refers to by name (hard rule 4): the main queue
// (dispatch_get_main_queue() is `&_dispatch_main_q`) and the concurrent-queue attribute
// (DISPATCH_QUEUE_CONCURRENT is `&_dispatch_queue_attr_concurrent`).
//
// Only their addresses matter: the handle layer recognises these two handles by address
// (GrandCentralExports/include/GrandCentralSymbols.h) and never writes the bytes. It reads
// one: a handle's kind byte, before it compares the handle with these (typedObject,
// Handles.swift); zero-filled, it reads as a queue's kind, never a group's or a semaphore's
// or any kind but the one each symbol stands for. They must stay zero-filled. The structs
// are completed here, privately, with padding of a plausible size. It is not zero
// because a non-PIC executable that takes the address gets a copy relocation: the
// linker reserves st_size bytes in the executable and every reference, the library's
// included, binds to that copy. That keeps the address unique, which is all we need.
// For the same reason these symbols must keep default visibility.
#include "shim.h"

struct dispatch_queue_s {
	_Alignas(64) unsigned char opaque[128];
};

struct dispatch_queue_attr_s {
	_Alignas(16) unsigned char opaque[16];
};

struct dispatch_queue_s _dispatch_main_q;
struct dispatch_queue_attr_s _dispatch_queue_attr_concurrent;

// dispatch_data_empty is `&_dispatch_data_empty`; like the main queue, only its address
// matters (the handle layer maps it to the engine's empty data object,
// GrandCentralExports/Handles.swift).
struct dispatch_data_s {
	_Alignas(16) unsigned char opaque[64];
};
struct dispatch_data_s _dispatch_data_empty;

// DISPATCH_DATA_DESTRUCTOR_FREE and _MUNMAP are the values of these symbols: pointers to
// two distinct global blocks that dispatch_data_create(_f) recognises by value and never
// calls. (A gcc translation unit sees them as dispatch_function_t: same bits.)
const dispatch_block_t _dispatch_data_destructor_free = ^{
	gc_client_bug("DISPATCH_DATA_DESTRUCTOR_FREE", "the destructor marker was called");
};
const dispatch_block_t _dispatch_data_destructor_munmap = ^{
	gc_client_bug("DISPATCH_DATA_DESTRUCTOR_MUNMAP", "the destructor marker was called");
};

// DISPATCH_SOURCE_TYPE_* are the addresses of these. Unlike the symbols above, the library
// reads them: a magic word (GC_SOURCE_TYPE_MAGIC) and the kind (a gc_source_kind_t,
// CGrandCentralKinds.h, the engine's SourceType), so dispatch_source_create tells its own types
// from any other pointer (for which it returns NULL). A copy relocation copies the
// initial contents too, so the executable's copy says the same.
struct dispatch_source_type_s {
	unsigned int magic;
	unsigned int kind;
	unsigned char reserved[24];
};
#define GC_SOURCE_TYPE(name, kind) \
	const struct dispatch_source_type_s _dispatch_source_type_##name = { GC_SOURCE_TYPE_MAGIC, kind, {0} }
GC_SOURCE_TYPE(data_add, GC_SOURCE_DATA_ADD);
GC_SOURCE_TYPE(data_or, GC_SOURCE_DATA_OR);
GC_SOURCE_TYPE(data_replace, GC_SOURCE_DATA_REPLACE);
GC_SOURCE_TYPE(read, GC_SOURCE_READ);
GC_SOURCE_TYPE(write, GC_SOURCE_WRITE);
GC_SOURCE_TYPE(signal, GC_SOURCE_SIGNAL);
GC_SOURCE_TYPE(timer, GC_SOURCE_TIMER);
GC_SOURCE_TYPE(proc, GC_SOURCE_PROCESS);
GC_SOURCE_TYPE(vnode, GC_SOURCE_VNODE);
GC_SOURCE_TYPE(interval, GC_SOURCE_INTERVAL);   // libdispatch's private DISPATCH_SOURCE_TYPE_INTERVAL (private.h)

// DISPATCH_DATA_DESTRUCTOR_NONE (private.h): like _FREE and _MUNMAP, a marker compared by
// value: the data object refers to the caller's buffer, neither copies nor frees it.
const dispatch_block_t _dispatch_data_destructor_none = ^{
	gc_client_bug("DISPATCH_DATA_DESTRUCTOR_NONE", "the destructor marker was called");
};

// DISPATCH_DATA_FORMAT_TYPE_* (private.h) are the addresses of these, read by
// dispatch_data_create_with_transform like the source types above: a magic word
// (GC_DATA_FORMAT_MAGIC) and the kind (a gc_data_format_t, CGrandCentralKinds.h, the
// engine's DataFormat). 40 bytes,
// the size of libdispatch's objects, so a copy relocation in an executable fits.
struct dispatch_data_format_type_s {
	unsigned int magic;
	unsigned int kind;
	unsigned char reserved[32];
};
#define GC_DATA_FORMAT(name, kind) \
	const struct dispatch_data_format_type_s _dispatch_data_format_type_##name = { GC_DATA_FORMAT_MAGIC, kind, {0} }
GC_DATA_FORMAT(none, GC_DATA_FORMAT_NONE);
GC_DATA_FORMAT(utf8, GC_DATA_FORMAT_UTF8);
GC_DATA_FORMAT(utf16le, GC_DATA_FORMAT_UTF16LE);
GC_DATA_FORMAT(utf16be, GC_DATA_FORMAT_UTF16BE);
GC_DATA_FORMAT(utf_any, GC_DATA_FORMAT_UTF_ANY);
GC_DATA_FORMAT(base32, GC_DATA_FORMAT_BASE32);
GC_DATA_FORMAT(base32hex, GC_DATA_FORMAT_BASE32HEX);
GC_DATA_FORMAT(base64, GC_DATA_FORMAT_BASE64);

// Foundation's autorelease-pool hooks (private.h): libdispatch calls them around work
// items of queues whose autorelease frequency is DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM,
// when a runtime has set them. swift-corelibs-foundation never sets them (there is no
// autorelease pool on Linux) and GrandCentral never calls them: they exist so a program that
// assigns them links and runs, and read back what it stored.
void *(*_dispatch_begin_NSAutoReleasePool)(void);
void (*_dispatch_end_NSAutoReleasePool)(void *);

// dispatch_queue_offsets (private.h): libdispatch's description of its queue struct for
// debuggers and crash reporters (version, then offset and size of the label, flags, serial
// number, width, running count, suspend count, target queue and priority fields). A
// GrandCentral queue handle is a Swift object whose layout the compiler chooses, so this
// describes no field: every offset and size is 0, which readers of the structure take as
// "not present" (libdispatch's own flags entry is 0, 0). The version is libdispatch's, 6.
// (The struct is declared in private.h.)
const struct dispatch_queue_offsets_s dispatch_queue_offsets = { .dqo_version = 6 };
