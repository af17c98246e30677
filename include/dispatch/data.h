/*
 * GrandCentral: Grand Central Dispatch for Linux.
 *
 * data.h: data objects. A dispatch_data_t is an immutable, reference-counted sequence of
 * bytes held in one or more regions of memory. Concatenating and taking subranges share
 * the regions and copy no bytes; each region is given back (its destructor runs) once,
 * when the last data object that shares it is released.
 *
 * The calls that take blocks are declared only under __BLOCKS__; dispatch_data_create_f
 * and dispatch_data_apply_f give plain C the whole API.
 */
#ifndef __DISPATCH_DATA__
#define __DISPATCH_DATA__

#ifndef __DISPATCH_INDIRECT__
#error "#include <dispatch/dispatch.h> rather than the headers it includes"
#endif

DISPATCH_DATA_DECL(dispatch_data);

/* The data object of size zero. Retaining and releasing it does nothing; calls whose
 * result would be empty return it. */
#define dispatch_data_empty \
		DISPATCH_GLOBAL_OBJECT(dispatch_data_t, _dispatch_data_empty)
DISPATCH_EXPORT struct dispatch_data_s _dispatch_data_empty;

/* Destructors. DEFAULT copies the bytes at creation, so the caller keeps its buffer.
 * FREE: the library owns the buffer and calls free(3) on it. MUNMAP: the library owns a
 * mapping of exactly `size` bytes and calls munmap(2) on it. Under __BLOCKS__ FREE and
 * MUNMAP are block-typed, as in libdispatch; without blocks they are function-typed and
 * can be passed to dispatch_data_create_f directly. The _F spellings are function-typed
 * in every mode. */
#define DISPATCH_DATA_DESTRUCTOR_DEFAULT NULL

#ifdef __BLOCKS__
#define DISPATCH_DATA_DESTRUCTOR_TYPE_DECL(name) \
		DISPATCH_EXPORT const dispatch_block_t _dispatch_data_destructor_##name
#else
#define DISPATCH_DATA_DESTRUCTOR_TYPE_DECL(name) \
		DISPATCH_EXPORT const dispatch_function_t _dispatch_data_destructor_##name
#endif

#define DISPATCH_DATA_DESTRUCTOR_FREE (_dispatch_data_destructor_free)
DISPATCH_DATA_DESTRUCTOR_TYPE_DECL(free);

#define DISPATCH_DATA_DESTRUCTOR_MUNMAP (_dispatch_data_destructor_munmap)
DISPATCH_DATA_DESTRUCTOR_TYPE_DECL(munmap);

/* The destructor symbol's value as a dispatch_function_t, for dispatch_data_create_f in
 * a translation unit compiled with blocks (the library compares values, never calls it). */
DISPATCH_INLINE dispatch_function_t
_dispatch_data_destructor_as_function(const void *symbol)
{
	dispatch_function_t function;
	memcpy(&function, symbol, sizeof function);
	return function;
}
#define DISPATCH_DATA_DESTRUCTOR_FREE_F \
		(_dispatch_data_destructor_as_function(&_dispatch_data_destructor_free))
#define DISPATCH_DATA_DESTRUCTOR_MUNMAP_F \
		(_dispatch_data_destructor_as_function(&_dispatch_data_destructor_munmap))

#ifdef __BLOCKS__
/* Creates a data object over `size` bytes at `buffer`. `destructor` is
 * DISPATCH_DATA_DESTRUCTOR_DEFAULT (copy now), _FREE, _MUNMAP, or a block submitted to
 * `queue` (NULL: the default-priority global queue) when the region is no longer used. */
DISPATCH_EXPORT DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_block_t destructor);
#endif

/* dispatch_data_create with a function destructor, called as destructor(buffer) on
 * `queue` (NULL: the default-priority global queue). NULL copies the bytes now;
 * DISPATCH_DATA_DESTRUCTOR_FREE(_F) and _MUNMAP(_F) free or unmap the buffer. An empty
 * buffer yields dispatch_data_empty, and a given destructor is run at once. */
DISPATCH_EXPORT DISPATCH_RETURNS_RETAINED DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_f(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_function_t destructor);

/* The number of bytes the data object represents. */
DISPATCH_EXPORT DISPATCH_PURE DISPATCH_NONNULL1 DISPATCH_NOTHROW
size_t
dispatch_data_get_size(dispatch_data_t data);

/* Returns a data object of one contiguous region holding the same bytes, and stores its
 * address and size through the non-NULL pointers. The bytes stay valid while the returned
 * object lives. A multi-region object is flattened once; later calls reuse the copy. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_map(dispatch_data_t data, const void **buffer_ptr,
		size_t *size_ptr);

/* The bytes of data1 followed by those of data2, sharing both (no bytes are copied). */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_concat(dispatch_data_t data1, dispatch_data_t data2);

/* `length` bytes of `data` from `offset` (clamped to the end), sharing its regions. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_create_subrange(dispatch_data_t data, size_t offset, size_t length);

/* An applier receives each region in order: a data object for exactly that region (valid
 * for the call; retain it to keep it), the region's offset in the whole, its bytes and
 * size. Returning false stops the traversal. */
typedef bool (*dispatch_data_applier_function_t)(void *context, dispatch_data_t region,
		size_t offset, const void *buffer, size_t size);

#ifdef __BLOCKS__
typedef bool (^dispatch_data_applier_t)(dispatch_data_t region, size_t offset,
		const void *buffer, size_t size);

/* Calls `applier` for each region in order; returns false if an applier call did. */
DISPATCH_EXPORT DISPATCH_NONNULL_ALL DISPATCH_NOTHROW
bool
dispatch_data_apply(dispatch_data_t data, DISPATCH_NOESCAPE dispatch_data_applier_t applier);
#endif

/* dispatch_data_apply with a function and a context. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_NOTHROW
bool
dispatch_data_apply_f(dispatch_data_t data, void *context,
		dispatch_data_applier_function_t applier);

/* The region that holds byte `location` of `data`, with the region's offset in `data`
 * stored in *offset_ptr. A location at or past the end yields dispatch_data_empty and
 * the size of `data`. */
DISPATCH_EXPORT DISPATCH_NONNULL1 DISPATCH_NONNULL3 DISPATCH_RETURNS_RETAINED
DISPATCH_WARN_RESULT DISPATCH_NOTHROW
dispatch_data_t
dispatch_data_copy_region(dispatch_data_t data, size_t location, size_t *offset_ptr);

#endif /* __DISPATCH_DATA__ */
